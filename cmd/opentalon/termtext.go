package main

// Text from users, platforms and the database is printed on an operator's
// terminal by the commands that read the database (queue, memory, usage,
// pair, session export): it goes through termText (a table's cells, a
// line), writeTermJSON (--json) or writeTermYAML, so a chat user cannot
// put an escape sequence into an operator's terminal.

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/channels/textfmt"
)

// writeTermJSON is writeJSON with what encoding/json leaves as it is
// but a terminal may act on escaped too, for JSON printed rather than
// piped: the C1 control characters (U+009B starts an escape sequence,
// as ESC [ does) and the bidirectional overrides (they reorder what is
// shown). They are only ever in strings; the JSON read back is the same.
func writeTermJSON(out io.Writer, v any) error {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return err
	}
	_, err := out.Write(escapeUnsafeRunes(buf.Bytes()))
	return err
}

// writeTermYAML writes v as YAML (indented by 2) that a terminal shows
// rather than acts on. yaml.v3 escapes the control characters (ESC, BEL,
// the C1 ones) in a double-quoted string, but writes the bidirectional
// overrides as they are, even in a plain string. So every string with a
// character termText would not print as it is is double-quoted, and what
// of those is still raw is escaped there (\u202e); the YAML read back is
// the same.
func writeTermYAML(out io.Writer, v any) error {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return err
	}
	quoteUnsafe(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := out.Write(escapeUnsafeRunes(buf.Bytes()))
	return err
}

// quoteUnsafe double-quotes every scalar under n that holds a character
// unsafeRune names other than a line break or a tab (yaml.v3 writes those
// safely in any style).
func quoteUnsafe(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && strings.ContainsFunc(n.Value, func(r rune) bool {
		return r != '\n' && r != '\t' && unsafeRune(r)
	}) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		quoteUnsafe(c)
	}
}

// escapeUnsafeRunes writes each character at or above U+007F that
// unsafeRune names in b as \uXXXX, an escape JSON strings and YAML's
// double-quoted ones read back as the character. Below U+007F encoding/json
// and yaml.v3 escape what a terminal acts on themselves.
func escapeUnsafeRunes(b []byte) []byte {
	clean := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r >= 0x7f && unsafeRune(r) {
			clean = fmt.Appendf(clean, `\u%04x`, r)
		} else {
			clean = append(clean, b[:size]...)
		}
		b = b[size:]
	}
	return clean
}

// termText is s made safe to print on an operator's terminal, on one
// line: a line break becomes " ⏎ ", a tab a space, and what a terminal
// would act on rather than show is written as an escape (\x1b, \u009b,
// \u202e): the control characters (an ANSI escape sequence a user put in
// their name could otherwise rewrite the screen or the window's title),
// the bidirectional overrides (they reorder what is shown), and bytes
// that are not UTF-8.
func termText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r' && strings.HasPrefix(s[i+size:], "\n"):
			// \r\n is one line break.
		case r == '\n' || r == '\u2028' || r == '\u2029':
			b.WriteString(" ⏎ ")
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x80 && unicode.IsControl(r):
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

// unsafeRune says termText does not print r as it is.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// writeTable writes rows as columns two spaces apart, each padded to the
// columns its text takes on a terminal (a wide character takes two,
// where text/tabwriter counts one); the last column is not padded.
func writeTable(out io.Writer, rows [][]string) error {
	var widths []int
	for _, r := range rows {
		for i := 0; i < len(r)-1; i++ {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], textfmt.DisplayWidth(r[i]))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-textfmt.DisplayWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// termLines is s made safe for the terminal as termText does, but with
// its line breaks (\n, \r\n written as \n) and tabs kept: for a message
// of several lines, such as an error followed by its usage.
func termLines(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		for j, c := range cells {
			cells[j] = termText(c)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
}
