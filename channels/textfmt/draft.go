package textfmt

import (
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Draft splits Markdown being written (cut anywhere) into the messages it
// fills, at most limit UTF-16 units of Markdown each (code fences closed
// and reopened across them), and formats each with format after closing
// what the cut left open (CloseMarkdown). A longer cut of the same text
// only grows the last part or adds parts.
func Draft(md string, limit int, format func(string) string) []core.DraftPart {
	raws := SplitMarkdown(capAnswer(md), limit)
	out := make([]core.DraftPart, 0, len(raws))
	for _, raw := range raws {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		out = append(out, core.DraftPart{Raw: raw, Part: format(CloseMarkdown(raw))})
	}
	return out
}

// CloseMarkdown closes what a cut left open at the end of md, for
// display: a code fence, then (outside code) an inline code span and a
// bold run.
func CloseMarkdown(md string) string {
	open := ""
	for _, line := range strings.Split(md, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") && isFence(t) {
			if open == "" {
				open = "```"
			} else if t == "```" || strings.TrimLeft(t, "`") == "" {
				open = ""
			}
		}
	}
	if open != "" {
		if !strings.HasSuffix(md, "\n") {
			md += "\n"
		}
		return md + "```"
	}
	// The last paragraph outside code: an odd number of backticks or of
	// "**" leaves a span open.
	last := md
	if i := strings.LastIndex(md, "\n\n"); i >= 0 {
		last = md[i:]
	}
	// A marker with nothing after it yet is dropped instead of closed.
	trimmed := strings.TrimRight(md, " ")
	switch {
	case strings.Count(last, "`")%2 == 1:
		if strings.HasSuffix(trimmed, "`") {
			return strings.TrimSuffix(trimmed, "`")
		}
		return md + "`"
	case strings.Count(last, "**")%2 == 1:
		if strings.HasSuffix(trimmed, "**") {
			return strings.TrimSuffix(trimmed, "**")
		}
		return md + "**"
	}
	return md
}
