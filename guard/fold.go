package guard

import (
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// placeholder stands in the view for a character that does not read as
// ASCII: it is neither a letter, a separator nor punctuation, so it
// breaks every keyword.
const placeholder = 0xFF

// ignorable reports characters the model does not see as text: the
// Unicode default-ignorable code points (zero-width space and joiners,
// word joiner, BOM, soft hyphen, combining grapheme joiner, variation
// selectors, Hangul fillers, Mongolian vowel separator, tag characters,
// bidi controls …) and every other format character (category Cf).
func ignorable(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x061C, r == 0x115F, r == 0x1160,
		r == 0x17B4, r == 0x17B5, r >= 0x180B && r <= 0x180F,
		r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E,
		r >= 0x2060 && r <= 0x206F, r == 0x3164, r >= 0xFE00 && r <= 0xFE0F,
		r == 0xFEFF, r == 0xFFA0, r >= 0xFFF0 && r <= 0xFFF8,
		r >= 0x1BCA0 && r <= 0x1BCA3, r >= 0x1D173 && r <= 0x1D17A,
		r >= 0xE0000 && r <= 0xE0FFF:
		return true
	case r < 0x80:
		return false
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Cc, r)
}

// confusable folds the look-alikes of Latin letters and of the
// punctuation the shapes are made of to the ASCII byte they pass for;
// 0 = not a look-alike. Compatibility forms (fullwidth, mathematical
// letters, …) are left to the NFKD decomposition.
func confusable(r rune) byte {
	switch r {
	// Cyrillic
	case 'А', 'а':
		return 'a'
	case 'В', 'в', 'Ь', 'ь':
		return 'b'
	case 'С', 'с':
		return 'c'
	case 'Ԁ', 'ԁ':
		return 'd'
	case 'Е', 'е':
		return 'e'
	case 'Һ', 'һ', 'Н', 'н':
		return 'h'
	case 'І', 'і':
		return 'i'
	case 'Ј', 'ј':
		return 'j'
	case 'К', 'к':
		return 'k'
	case 'Ӏ', 'ӏ':
		return 'l'
	case 'М', 'м':
		return 'm'
	case 'п':
		return 'n'
	case 'О', 'о':
		return 'o'
	case 'Р', 'р':
		return 'p'
	case 'Ԛ', 'ԛ':
		return 'q'
	case 'г':
		return 'r'
	case 'Ѕ', 'ѕ':
		return 's'
	case 'Т', 'т':
		return 't'
	case 'и':
		return 'u'
	case 'Ԝ', 'ԝ', 'ш':
		return 'w'
	case 'Х', 'х':
		return 'x'
	case 'У', 'у', 'Ү', 'ү':
		return 'y'
	// Greek
	case 'Α', 'α':
		return 'a'
	case 'Β', 'β':
		return 'b'
	case 'ϲ', 'Ϲ':
		return 'c'
	case 'Ε', 'ε':
		return 'e'
	case 'Η':
		return 'h'
	case 'Ι', 'ι':
		return 'i'
	case 'ϳ', 'Ϳ':
		return 'j'
	case 'Κ', 'κ':
		return 'k'
	case 'Μ':
		return 'm'
	case 'Ν', 'η':
		return 'n'
	case 'Ο', 'ο':
		return 'o'
	case 'Ρ', 'ρ':
		return 'p'
	case 'Τ', 'τ':
		return 't'
	case 'υ':
		return 'u'
	case 'ν':
		return 'v'
	case 'ω':
		return 'w'
	case 'Χ', 'χ':
		return 'x'
	case 'Υ', 'γ':
		return 'y'
	case 'Ζ':
		return 'z'
	// Latin look-alikes without a compatibility decomposition
	case 'ɑ', 'ᴀ':
		return 'a'
	case 'ʙ':
		return 'b'
	case 'ᴄ':
		return 'c'
	case 'ᴅ':
		return 'd'
	case 'ᴇ':
		return 'e'
	case 'ꜰ':
		return 'f'
	case 'ɡ', 'ɢ':
		return 'g'
	case 'ʜ':
		return 'h'
	case 'ı', 'ɩ', 'ɪ':
		return 'i'
	case 'ȷ', 'ᴊ':
		return 'j'
	case 'ᴋ':
		return 'k'
	case 'ʟ':
		return 'l'
	case 'ᴍ':
		return 'm'
	case 'ɴ':
		return 'n'
	case 'ᴏ':
		return 'o'
	case 'ᴘ':
		return 'p'
	case 'ʀ':
		return 'r'
	case 'ꜱ':
		return 's'
	case 'ᴛ':
		return 't'
	case 'ᴜ':
		return 'u'
	case 'ᴠ':
		return 'v'
	case 'ᴡ':
		return 'w'
	case 'ʏ':
		return 'y'
	case 'ᴢ':
		return 'z'
	// Punctuation the shapes are built from
	case '‹', '⟨', '\u3008', '﹤', '˂', '❮', '≺':
		return '<'
	case '›', '⟩', '\u3009', '﹥', '˃', '❯', '≻':
		return '>'
	case '⁅', '⟦', '〚', '【', '〔', '［':
		return '['
	case '⁆', '⟧', '〛', '】', '〕', '］':
		return ']'
	case '∣', 'ǀ', '￨', '│', '┃', '丨', '⏐', '︱', '❘', '｜':
		return '|'
	case '⁄', '∕', '⧸', '╱':
		return '/'
	case '⧵', '∖', '╲':
		return '\\'
	case '‗', '▁', '＿', 'ˍ':
		return '_'
	case '‐', '‑', '‒', '–', '—', '―', '−', '⁃', '﹣':
		return '-'
	case '“', '”', '„', '‟', '″', '〃', '＂', '«', '»':
		return '"'
	case '‘', '’', '‚', '‛', '′', '＇':
		return '\''
	case 'ː', '˸', '꞉', '∶', '﹕', '︰':
		return ':'
	case '•', '·', '◦', '‣', '▪', '●', '∙', '⋅':
		return '*'
	}
	return 0
}

// lineBreak reports the characters that end a line for the model.
func lineBreak(r rune) bool { return r == '\n' || r == 0x85 || r == 0x2028 || r == 0x2029 }

// appendFold appends the view bytes of the rune r, which starts s, to b
// and returns b. Every byte it appends stands for that one rune.
func appendFold(b []byte, s string, r rune) []byte {
	if r < utf8.RuneSelf {
		return append(b, asciiView[r])
	}
	if r < smallFoldRunes {
		f := smallFold()[r]
		return append(b, f.b[:f.n]...)
	}
	return foldSlow(b, s, r, 0)
}

func foldSlow(b []byte, s string, r rune, depth int) []byte {
	if r < utf8.RuneSelf {
		return append(b, asciiView[r])
	}
	switch {
	case lineBreak(r):
		return append(b, '\n')
	case ignorable(r):
		return b
	case unicode.IsSpace(r) || r == 0x2800:
		return append(b, ' ')
	}
	if c := confusable(r); c != 0 {
		return append(b, c)
	}
	// Scripts without compatibility forms that read as ASCII.
	if r >= 0x4E00 && r <= 0x9FFF || r >= 0xAC00 && r <= 0xD7A3 || r >= 0x3041 && r <= 0x3096 || r >= 0x30A1 && r <= 0x30FA {
		return append(b, placeholder)
	}
	if unicode.In(r, unicode.Mn, unicode.Me) {
		return b
	}
	if depth < 3 {
		if d := norm.NFKD.PropertiesString(s).Decomposition(); len(d) > 0 {
			var sb [utf8.UTFMax]byte
			for len(d) > 0 {
				dr, size := utf8.DecodeRune(d)
				b = foldSlow(b, string(append(sb[:0], d[:size]...)), dr, depth+1)
				d = d[size:]
			}
			return b
		}
	}
	return append(b, placeholder)
}

// smallFoldRunes is how many runes smallFold covers.
const smallFoldRunes = 0x500

// smallFold holds the view bytes of every rune below U+0500 (Latin,
// Greek, Cyrillic: the common non-ASCII letters), computed by foldSlow
// when first needed (not at start: it is most of the package's
// initialization).
var smallFold = sync.OnceValue(func() *[smallFoldRunes]struct {
	b [6]byte
	n uint8
} {
	t := new([smallFoldRunes]struct {
		b [6]byte
		n uint8
	})
	var enc [utf8.UTFMax]byte
	for r := rune(0); r < rune(len(t)); r++ {
		n := utf8.EncodeRune(enc[:], r)
		f := foldSlow(nil, string(enc[:n]), r, 0)
		if len(f) > len(t[r].b) {
			panic(fmt.Sprintf("guard: U+%04X folds to %d bytes", r, len(f)))
		}
		t[r].n = uint8(copy(t[r].b[:], f))
	}
	return t
})

// asciiView maps each ASCII byte to its view byte: lower case, every
// horizontal space (tab, CR, VT, FF) a plain space, other controls the
// placeholder.
var asciiView = func() (t [128]byte) {
	for i := range t {
		c := byte(i)
		switch {
		case c >= 'A' && c <= 'Z':
			t[i] = c + 'a' - 'A'
		case c == '\n':
			t[i] = '\n'
		case c == '\t' || c == '\r' || c == '\v' || c == '\f':
			t[i] = ' '
		case c < 0x20 || c == 0x7F:
			t[i] = placeholder
		default:
			t[i] = c
		}
	}
	return t
}()
