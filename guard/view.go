package guard

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// A view is a text reduced to what the model reads, for matching: HTML
// entities, JSON and \x escapes and printable percent-encoding decoded
// (repeatedly, up to maxDecodeRounds levels), compatibility characters
// decomposed (NFKD, the first half of NFKC, so fullwidth and
// mathematical letters become ASCII), combining marks, format and other
// default-ignorable characters removed, Cyrillic and Greek look-alikes
// folded to Latin, ASCII lower-cased, and every other character a
// placeholder byte. Each view byte remembers the span of the original
// text it came from, so a match in the view neutralizes exactly the
// original characters that spell it.
type view struct {
	b []byte
	// The original span of each view byte is kept one of three ways:
	// ident (view byte i is original byte i), breaks (when nothing was
	// decoded: one entry per non-ASCII character, ASCII runs between
	// them map byte for byte), or start (after decoding: start[i] is
	// where the original characters of b[i] begin). The characters of
	// b[i] end where the first later view byte with a greater start
	// begins, or at the end of the text.
	ident  bool
	breaks []brk
	start  []int32 // nil unless decoded
	n      int     // length of the original text

	// scratch for decoding rounds
	b2 []byte
	s2 []int32
}

// brk records one non-ASCII character: its n view bytes start at v, and
// it is the size bytes at o in the original.
type brk struct{ v, n, o, size int32 }

// maxDecodeRounds bounds nested encodings (&amp;lt; is two rounds).
const maxDecodeRounds = 6

// startOf returns where the original characters of view byte i begin.
func (v *view) startOf(i int) int {
	switch {
	case v.ident:
		return i
	case v.start != nil:
		return int(v.start[i])
	}
	k := v.brkAt(i)
	if k < 0 {
		return i
	}
	b := v.breaks[k]
	if int32(i) < b.v+b.n {
		return int(b.o)
	}
	return int(b.o+b.size) + i - int(b.v+b.n)
}

// brkAt returns the last break at or before view byte i, or -1.
func (v *view) brkAt(i int) int {
	lo, hi := 0, len(v.breaks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v.breaks[m].v <= int32(i) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// span maps the view range [i, j) to the original text. The range grows
// over characters the view dropped right after it (zero-width and other
// ignorable characters), so they go with the match, and never ends
// inside a character: all view bytes of one original character (a
// decomposition, a decoded entity) share its start.
func (v *view) span(i, j int) (int, int) {
	if v.ident {
		return i, j
	}
	s := v.startOf(i)
	last := v.startOf(j - 1)
	if v.start == nil {
		// Past the other view bytes of the character j-1 belongs to.
		if k := v.brkAt(j - 1); k >= 0 && int32(j-1) < v.breaks[k].v+v.breaks[k].n {
			j = int(v.breaks[k].v + v.breaks[k].n)
		}
		if j < len(v.b) {
			return s, v.startOf(j)
		}
		return s, v.n
	}
	for ; j < len(v.b); j++ {
		if int(v.start[j]) > last {
			return s, int(v.start[j])
		}
	}
	return s, v.n
}

// build makes the view of text, reusing v's buffers. The loops work on
// local slices: storing into v on every step would cost a GC write
// barrier each time.
func (v *view) build(text string) {
	b := slices.Grow(v.b[:0], len(text))
	v.n = len(text)
	if v.s2 == nil {
		v.s2 = v.start[:0] // keep the buffer for the next decoding
	}
	v.breaks, v.start = v.breaks[:0], nil
	if plainASCII(text) {
		v.ident = true
		b = b[:len(text)]
		for i := 0; i < len(text); i++ {
			b[i] = asciiView[text[i]]
		}
		v.b = b
		return
	}
	v.ident = false
	encoded := strings.IndexByte(text, '&') >= 0 || strings.IndexByte(text, '%') >= 0 || strings.IndexByte(text, '\\') >= 0
	breaks := v.breaks
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			j := i + 1
			for j < len(text) && text[j] < utf8.RuneSelf {
				j++
			}
			n0 := len(b)
			b = slices.Grow(b, j-i)[:n0+j-i]
			vb := b[n0:]
			for k := range vb {
				vb[k] = asciiView[text[i+k]]
			}
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		n0 := len(b)
		b = appendFold(b, text[i:], r)
		breaks = append(breaks, brk{v: int32(n0), n: int32(len(b) - n0), o: int32(i), size: int32(size)})
		for _, c := range b[n0:] {
			encoded = encoded || c == '&' || c == '%' || c == '\\'
		}
		i += size
	}
	v.b, v.breaks = b, breaks
	if !encoded {
		return
	}
	// Decoding needs the start of every view byte.
	start := slices.Grow(v.s2[:0], len(b))[:len(b)]
	for i := range start {
		start[i] = int32(v.startOf(i))
	}
	v.start, v.s2 = start, nil
	for range maxDecodeRounds {
		if !v.decodeOnce() {
			break
		}
	}
}

// plainASCII reports text the view maps byte for byte: ASCII without the
// characters that start an encoding.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return strings.IndexByte(s, '&') < 0 && strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '\\') < 0
}

// decodeOnce decodes one level of encodings; false when there was none.
func (v *view) decodeOnce() bool {
	b := v.b
	first := -1
	for i, c := range b {
		if c == '&' || c == '%' || c == '\\' {
			if _, n := decodeAt(b, i); n > 0 {
				first = i
				break
			}
		}
	}
	if first < 0 {
		return false
	}
	nb, ns := append(v.b2[:0], b[:first]...), append(v.s2[:0], v.start[:first]...)
	var enc [utf8.UTFMax]byte
	for i := first; i < len(b); {
		c := b[i]
		if c == '&' || c == '%' || c == '\\' {
			if r, n := decodeAt(b, i); n > 0 {
				s := v.start[i]
				k := utf8.EncodeRune(enc[:], r)
				n0 := len(nb)
				nb = appendFold(nb, string(enc[:k]), r)
				for range len(nb) - n0 {
					ns = append(ns, s)
				}
				i += n
				continue
			}
		}
		nb, ns = append(nb, c), append(ns, v.start[i])
		i++
	}
	v.b, v.b2 = nb, v.b[:0]
	v.start, v.s2 = ns, v.start[:0]
	return true
}

// decodeAt decodes the encoded character at b[i] (an entity, an escape
// or a percent-encoding, already lower-cased by the view) and returns it
// with the number of view bytes it took; n = 0 when there is none.
func decodeAt(b []byte, i int) (r rune, n int) {
	switch b[i] {
	case '&':
		return decodeEntity(b, i)
	case '%':
		if h, ok := hexAt(b, i+1, 2); ok && h >= 0x20 && h < 0x7F {
			return rune(h), 3
		}
	case '\\':
		return decodeEscape(b, i)
	}
	return 0, 0
}

func decodeEscape(b []byte, i int) (rune, int) {
	if i+1 >= len(b) {
		return 0, 0
	}
	switch b[i+1] {
	case 'u':
		if i+2 < len(b) && b[i+2] == '{' {
			j := i + 3
			for j < len(b) && j-i-3 < 6 && hexVal(b[j]) >= 0 {
				j++
			}
			if j > i+3 && j < len(b) && b[j] == '}' {
				h, _ := hexAt(b, i+3, j-i-3)
				return validRune(h), j + 1 - i
			}
			return 0, 0
		}
		h, ok := hexAt(b, i+2, 4)
		if !ok {
			return 0, 0
		}
		if h >= 0xD800 && h < 0xDC00 && i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if lo, ok := hexAt(b, i+8, 4); ok && lo >= 0xDC00 && lo < 0xE000 {
				return rune(0x10000 + (h-0xD800)<<10 + (lo - 0xDC00)), 12
			}
		}
		return validRune(h), 6
	case 'x':
		if h, ok := hexAt(b, i+2, 2); ok {
			return rune(h), 4
		}
	case '"', '\'', '\\', '/':
		return rune(b[i+1]), 2
	case 'n':
		return '\n', 2
	case 't', 'r', 'f', 'b', 'v':
		return ' ', 2
	}
	return 0, 0
}

func decodeEntity(b []byte, i int) (rune, int) {
	j := i + 1
	if j < len(b) && b[j] == '#' {
		j++
		hex := j < len(b) && b[j] == 'x'
		if hex {
			j++
		}
		d0 := j
		var val int
		for j < len(b) && j-d0 < 8 {
			var d int
			if hex {
				d = hexVal(b[j])
			} else if b[j] >= '0' && b[j] <= '9' {
				d = int(b[j] - '0')
			} else {
				d = -1
			}
			if d < 0 {
				break
			}
			if hex {
				val = val*16 + d
			} else {
				val = val*10 + d
			}
			j++
		}
		if j == d0 {
			return 0, 0
		}
		if j < len(b) && b[j] == ';' {
			j++
		}
		return validRune(val), j - i
	}
	for j < len(b) && j-i <= 32 && isAlnum(b[j]) {
		j++
	}
	name := b[i+1 : j]
	if len(name) == 0 {
		return 0, 0
	}
	if j < len(b) && b[j] == ';' {
		if r, ok := entities[string(name)]; ok {
			return r, j + 1 - i
		}
		return 0, 0
	}
	// The legacy entities a browser also decodes without ';'.
	switch string(name) {
	case "lt":
		return '<', j - i
	case "gt":
		return '>', j - i
	case "quot":
		return '"', j - i
	case "amp":
		return '&', j - i
	}
	return 0, 0
}

func validRune(v int) rune {
	if v < 0 || v > utf8.MaxRune || v >= 0xD800 && v < 0xE000 {
		return utf8.RuneError
	}
	return rune(v)
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

func hexAt(b []byte, i, n int) (int, bool) {
	if i+n > len(b) {
		return 0, false
	}
	v := 0
	for _, c := range b[i : i+n] {
		d := hexVal(c)
		if d < 0 {
			return 0, false
		}
		v = v*16 + d
	}
	return v, true
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// entities are the named HTML character references that spell the
// characters the shapes are made of (and the invisible ones that hide
// them), by lower-cased name.
var entities = map[string]rune{
	"lt": '<', "gt": '>', "amp": '&', "quot": '"', "apos": '\'',
	"lsqb": '[', "rsqb": ']', "lbrack": '[', "rbrack": ']',
	"lbrace": '{', "rbrace": '}', "lcub": '{', "rcub": '}',
	"vert": '|', "verbar": '|', "verticalline": '|', "sol": '/', "bsol": '\\',
	"colon": ':', "lowbar": '_', "underbar": '_', "equals": '=', "quest": '?',
	"excl": '!', "num": '#', "period": '.', "comma": ',', "semi": ';',
	"lpar": '(', "rpar": ')', "ast": '*', "midast": '*', "plus": '+',
	"dollar": '$', "percnt": '%', "commat": '@', "hyphen": '-', "dash": '‐',
	"grave": '`', "hat": '^', "tilde": '˜', "newline": '\n', "tab": '\t',
	"nbsp": 0xA0, "shy": 0xAD, "zerowidthspace": 0x200B, "zwj": 0x200D,
	"zwnj": 0x200C, "nobreak": 0x2060, "invisibletimes": 0x2062,
	"invisiblecomma": 0x2063, "it": 0x2062, "ic": 0x2063,
	"lang": '⟨', "rang": '⟩', "langle": '⟨', "rangle": '⟩',
	"lsaquo": '‹', "rsaquo": '›', "laquo": '«', "raquo": '»',
	"ldquo": '“', "rdquo": '”', "lsquo": '‘', "rsquo": '’',
	"bull": '•', "middot": '·', "mdash": '—', "ndash": '–', "horbar": '―',
	"lowast": '∗', "mid": '∣', "ratio": '∶',
}
