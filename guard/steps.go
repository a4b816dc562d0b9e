package guard

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// Block markers around plugin output.
const (
	OpenMarker  = "[plugin_output]"
	CloseMarker = "[/plugin_output]"
)

// Removed replaces every stripped pattern, so removals cannot splice the
// surrounding text into a new pattern.
const Removed = "[removed]"

// DefaultPatterns match text that looks like a tool call in the shapes the
// known model families and providers use. Matches are replaced by Removed.
var defaultPatterns = []string{
	// Generic bracket and XML-ish tags.
	`(?i)\[\s*/?\s*tool_calls?\s*\]`,
	`(?i)\[\s*/?\s*function_calls?\s*\]`,
	`(?i)</?\s*function_calls?\b[^>]*>`,
	`(?i)</?\s*tool_calls?\b[^>]*>`,
	`(?i)</?\s*tool_use\b[^>]*>`,
	// Anthropic's XML tool-use shape.
	`(?i)</?\s*invoke\b[^>]*>`,
	`(?i)</?\s*parameter\s+name\b[^>]*>`,
	// Special tokens: Mistral, Llama, Hermes/Qwen, ChatML role switches.
	`(?i)\[\s*/?\s*TOOL_CALLS\s*\]`,
	`<\|python_tag\|>`,
	`(?i)<\|\s*/?\s*tool_calls?(_begin|_end)?\s*\|>`,
	`<\|im_(start|end)\|>`,
	`<\|(start_header_id|end_header_id|eot_id)\|>`,
	// OpenAI JSON shapes.
	`(?i)"tool_calls"\s*:`,
	`(?i)"function_call"\s*:`,
	`(?i)"type"\s*:\s*"function"`,
	// Anthropic JSON shapes.
	`(?i)"type"\s*:\s*"tool_use"`,
	`(?i)"type"\s*:\s*"tool_result"`,
	// Gemini JSON shape.
	`(?i)"functionCall"\s*:`,
}

// markerRE matches any spelling of the block markers.
var markerRE = regexp.MustCompile(`(?i)\[\s*(/?)\s*plugin_output\s*\]`)

// Sanitizer strips tool-call-looking text.
type Sanitizer struct {
	patterns []*regexp.Regexp
}

// NewSanitizer compiles the default patterns plus extra ones
// (plugins.tools.sanitize.extra_patterns, Go RE2 syntax).
func NewSanitizer(extra []string) (*Sanitizer, error) {
	s := &Sanitizer{}
	for _, p := range defaultPatterns {
		s.patterns = append(s.patterns, regexp.MustCompile(p))
	}
	for i, p := range extra {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, core.Errorf(core.KindInvalid, "plugins.tools.sanitize.extra_patterns[%d] %q is not a valid regular expression (Go RE2 syntax): %w", i, p, err)
		}
		s.patterns = append(s.patterns, re)
	}
	return s, nil
}

// Sanitize replaces every match of every pattern by Removed; it repeats
// until nothing matches, so nested tricks cannot survive.
func (s *Sanitizer) Sanitize(text string) string {
	for range 4 {
		changed := false
		for _, re := range s.patterns {
			if re.MatchString(text) {
				text = re.ReplaceAllLiteralString(text, Removed)
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	return text
}

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

// ValidateResult checks that res answers call and is plain text. The
// returned error is for the log; the LLM gets GenericError.
func ValidateResult(call core.ToolCall, res core.ToolResult) error {
	if res.CallID != call.ID {
		return fmt.Errorf("result call id %q does not match the call id %q", res.CallID, call.ID)
	}
	for name, s := range map[string]string{"content": res.Content, "error": res.Error} {
		if !utf8.ValidString(s) {
			return fmt.Errorf("result %s is not valid UTF-8", name)
		}
		if i := strings.IndexFunc(s, isBinary); i >= 0 {
			return fmt.Errorf("result %s contains a binary byte at offset %d", name, i)
		}
	}
	return nil
}

// GenericError replaces an invalid result.
const GenericError = "the plugin returned an invalid result"

func isBinary(r rune) bool {
	if r == '\n' || r == '\r' || r == '\t' {
		return false
	}
	return r < 0x20 || r == 0x7f
}

// Wrap encloses text in a [plugin_output] block. Any marker inside is
// escaped to "(plugin_output)" / "(/plugin_output)", so the plugin cannot
// close the block early or open a new one.
func Wrap(text string) string {
	return OpenMarker + "\n" + Escape(text) + "\n" + CloseMarker
}

// Escape neutralizes the block markers inside text.
func Escape(text string) string {
	return markerRE.ReplaceAllString(text, "(${1}plugin_output)")
}
