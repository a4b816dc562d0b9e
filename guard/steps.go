package guard

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// Block markers around plugin output.
const (
	OpenMarker  = "[plugin_output]"
	CloseMarker = "[/plugin_output]"
)

// Truncate cuts text to at most max bytes on a UTF-8 boundary and appends
// a notice saying how much was cut. max <= 0 means no limit.
func Truncate(text string, max int) (string, bool) {
	if max <= 0 || len(text) <= max {
		return text, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + fmt.Sprintf("\n[truncated: the plugin returned %d bytes; only the first %d are shown]", len(text), cut), true
}

// ValidateResult checks that res answers call and is clean text: valid
// UTF-8 without NUL, control, bidi-override or tag characters (Clean
// removes those before; what remains here is rejected). The returned
// error is for the log; the LLM gets GenericError.
func ValidateResult(call core.ToolCall, res core.ToolResult) error {
	if res.CallID != call.ID {
		return fmt.Errorf("result call id %q does not match the call id %q", res.CallID, call.ID)
	}
	for _, f := range []struct{ name, s string }{{"content", res.Content}, {"error", res.Error}} {
		if err := CheckText(f.s); err != nil {
			return fmt.Errorf("result %s %w", f.name, err)
		}
		if i := indexStripped(f.s); i >= 0 {
			r, _ := utf8.DecodeRuneInString(f.s[i:])
			return fmt.Errorf("result %s contains the control character U+%04X at offset %d", f.name, r, i)
		}
	}
	return nil
}

// GenericError replaces an invalid result.
const GenericError = "the plugin returned an invalid result"

// Wrap encloses text in a [plugin_output] block. Every spelling of a
// marker inside is escaped to "(plugin_output)" / "(/plugin_output)", so
// the text cannot close the block early or open a new one.
func Wrap(text string) string {
	return wrapEscaped(Escape(text))
}

func wrapEscaped(text string) string {
	return OpenMarker + "\n" + text + "\n" + CloseMarker
}

// Escape neutralizes every spelling of the block markers inside text.
func Escape(text string) string {
	var s Sanitizer
	return s.Escape(text)
}

// Unwrap returns the text inside a block made by Wrap, and false when
// text is not exactly one such block.
func Unwrap(text string) (string, bool) {
	inner, ok := strings.CutPrefix(text, OpenMarker+"\n")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "\n"+CloseMarker)
	return inner, ok
}
