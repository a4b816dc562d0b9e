package guard

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the plugin-controlled text that reaches the system prompt or
// the tool list outside a result (plugin, action and parameter
// descriptions), and of a post_process prompt.
const (
	MaxDescriptionRunes = 300
	MaxPromptBytes      = 4096
)

// OneLine makes plugin-controlled text safe to put in the system prompt
// or a tool definition: invalid UTF-8 and NUL dropped, cleaned and
// sanitized like a result, every whitespace run (line breaks included) a
// single space, and at most max runes, cut with "…". A plugin therefore
// cannot start a line of its own (to forge an operator rule) or make
// every prompt huge.
func (s *Sanitizer) OneLine(text string, max int) string {
	// Bound the work before anything else: a 1 MB description costs no
	// more than a short one.
	if limit := 4 * max; len(text) > limit {
		text, _ = cutBytes(text, limit)
	}
	text = strings.ToValidUTF8(text, "")
	text = strings.ReplaceAll(text, "\x00", "")
	text = s.Sanitize(Clean(text))
	var b strings.Builder
	b.Grow(len(text))
	space, n := false, 0
	for _, r := range text {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
			n++
		}
		space = false
		if n >= max {
			return strings.TrimSpace(b.String()) + "…"
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// Prompt bounds a plugin-declared post_process prompt: valid UTF-8,
// cleaned, at most MaxPromptBytes.
func Prompt(text string) string {
	text = Clean(strings.ReplaceAll(strings.ToValidUTF8(text, ""), "\x00", ""))
	text, _ = cutBytes(text, MaxPromptBytes)
	return strings.TrimSpace(text)
}

// cutBytes cuts s to at most n bytes on a rune boundary.
func cutBytes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
