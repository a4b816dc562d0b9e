package console

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shown is s made safe to write on the operator's terminal: what a
// terminal would act on rather than show is written as an escape the
// operator can read. An answer is the model's text, and a model (or a
// prompt injection in a page a tool read) can emit ESC [ 2J (clear the
// screen), OSC 52 (write the clipboard), OSC 8 (a link that shows other
// text than it goes to) or a C1 control (U+009B starts a sequence as
// ESC [ does). So: the control characters other than a line break and a
// tab are written as \x1b or \u009b; a lone carriage return (it would
// let a line overwrite the one shown) as \x0d, \r\n as a line break; the
// bidirectional overrides, embeddings and isolates (they reorder what is
// shown) as \u202e; bytes that are not UTF-8 as \xff. The marks LRM, RLM
// and ALM stay: right-to-left writing uses them and they reorder
// nothing. Text, emoji, CJK, markdown and code blocks print as they are.
func shown(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r' && strings.HasPrefix(s[i+size:], "\n"):
			// \r\n is one line break: the \n follows.
		case r == '\u2028' || r == '\u2029':
			b.WriteByte('\n')
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// unsafeRune says shown does not write r as it is.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r == '\u200e' || r == '\u200f' || r == '\u061c':
		return false // LRM, RLM, ALM
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}
