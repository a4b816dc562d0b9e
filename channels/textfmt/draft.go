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
//
// Formatting can lengthen a part (an escaped "@everyone", "&amp;", a
// table laid out in a code block), so a part whose formatted form is over
// limit as size measures it (nil: Len) is cut again, smaller, until each
// fits: the platform would refuse it and the stream would stop there.
func Draft(md string, limit int, format func(string) string, size func(string) int) []core.DraftPart {
	if size == nil {
		size = Len
	}
	limit = max(limit, MinLimit)
	out := make([]core.DraftPart, 0, 2)
	return draftFit(out, capAnswer(md), limit, limit, format, size)
}

// draftFit appends md's parts, cut at cut units of Markdown, to out; a
// part formatted over limit is cut again, an eighth smaller.
func draftFit(out []core.DraftPart, md string, cut, limit int, format func(string) string, size func(string) int) []core.DraftPart {
	for _, raw := range SplitMarkdown(md, cut) {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		part := format(CloseMarkdown(raw))
		if size(part) > limit && cut > MinLimit {
			// The smaller cut depends on cut alone, not on how long the
			// part is yet: a part filled at it stays the same as the
			// text grows (a draft only grows).
			out = draftFit(out, raw, max(cut-cut/8, MinLimit), limit, format, size)
			continue
		}
		out = append(out, core.DraftPart{Raw: raw, Part: part})
	}
	return out
}

// CloseMarkdown closes what a cut left open at the end of md, for
// display: a code fence, then (outside code) an inline code span and a
// bold run.
func CloseMarkdown(md string) string {
	open := ""
	after := 0 // where the text after the last closed code block begins
	at := 0
	for _, line := range strings.Split(md, "\n") {
		at += len(line) + 1
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") && isFence(t) {
			if open == "" {
				open = "```"
			} else if t == "```" || strings.TrimLeft(t, "`") == "" {
				open = ""
				after = min(at, len(md))
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
	// Backticks and "**" inside a closed code block do not count.
	last := md[after:]
	if i := strings.LastIndex(last, "\n\n"); i >= 0 {
		last = last[i:]
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
