package guard

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// stripped reports the characters Clean removes: C0 controls other than
// tab, line feed and carriage return (NUL excepted: it marks binary
// output, which is rejected), DEL, C1 controls, the bidi overrides and
// isolates, and the tag characters.
func stripped(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r' || r == 0:
		return false
	case r < 0x20 || r == 0x7F || r >= 0x80 && r <= 0x9F:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	case r >= 0xE0000 && r <= 0xE007F:
		return true
	}
	return false
}

// indexStripped returns the byte offset of the first character Clean
// removes, or -1. It decodes only at the bytes such a character can
// start with (C0, DEL, and the lead bytes C2: C1 controls, E2: bidi,
// F3: tags).
func indexStripped(s string) int {
	for i := 0; i < len(s); i++ {
		if !suspect[s[i]] {
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			return i
		}
		if r, _ := utf8.DecodeRuneInString(s[i:]); stripped(r) {
			return i
		}
	}
	return -1
}

var suspect = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t' && c != '\n' && c != '\r' && c != 0
	}
	t[0x7F], t[0xC2], t[0xE2], t[0xF3] = true, true, true, true
	return t
}()

// Clean removes the characters stripped reports and keeps the rest of
// the text; it returns text itself when there is nothing to remove. Text
// that is not valid UTF-8 is returned as it is, for CheckText to reject.
func Clean(text string) string {
	i := indexStripped(text)
	if i < 0 || !utf8.ValidString(text) {
		return text
	}
	return clean(text, i)
}

func clean(text string, i int) string {
	var b strings.Builder
	b.Grow(len(text))
	b.WriteString(text[:i])
	for _, r := range text[i:] {
		if !stripped(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckText rejects output that is not text: invalid UTF-8, a NUL byte,
// or mostly control characters (binary data that happens to decode).
// The error is for the log; the LLM gets GenericError.
func CheckText(s string) error {
	_, err := cleanText(s)
	return err
}

// cleanText is CheckText followed by Clean, in one pass over clean text.
func cleanText(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("is not valid UTF-8")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return "", fmt.Errorf("contains a NUL byte at offset %d", i)
	}
	i := indexStripped(s)
	if i < 0 {
		return s, nil
	}
	n := 0
	for _, c := range []byte(s[i:]) {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7F {
			n++
		}
	}
	if n > 32 && n*8 > len(s) {
		return "", fmt.Errorf("is binary: %d of its %d bytes are control characters", n, len(s))
	}
	return clean(s, i), nil
}
