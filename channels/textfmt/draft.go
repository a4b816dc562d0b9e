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
	d := drafter{limit: limit, format: format, size: size, out: make([]core.DraftPart, 0, 2)}
	d.fit(capAnswer(md), limit)
	return d.out
}

// drafter is one Draft call's state.
type drafter struct {
	limit  int
	format func(string) string
	size   func(string) int
	out    []core.DraftPart
	// atoms is the tokenizer's array, used by every cut: a part cut
	// again (an eighth smaller each time) tokenized anew into its own
	// array, which made a 128 KB answer of wide tables allocate over
	// 100 MB per streamed edit.
	atoms []atom
}

// fit appends md's parts, cut at cut units of Markdown, to d.out; a part
// formatted over the limit is cut again, an eighth smaller.
func (d *drafter) fit(md string, cut int) {
	var parts []string
	parts, d.atoms = splitMarkdownInto(md, cut, d.atoms)
	for _, raw := range parts {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		part := d.format(CloseMarkdown(raw))
		if d.size(part) > d.limit && cut > MinLimit {
			// The smaller cut depends on cut alone, not on how long the
			// part is yet: a part filled at it stays the same as the
			// text grows (a draft only grows).
			d.fit(raw, max(cut-cut/8, MinLimit))
			continue
		}
		d.out = append(d.out, core.DraftPart{Raw: raw, Part: part})
	}
}

// CloseMarkdown closes what a cut left open at the end of md, for
// display: a code fence, then (outside code) an inline code span and a
// bold run.
func CloseMarkdown(md string) string {
	open := ""
	after := 0 // where the text after the last closed code block begins
	at := 0
	for rest := md; ; {
		line, more, found := strings.Cut(rest, "\n")
		rest = more
		at += len(line) + 1
		// Fences as the renderer reads them: "```" or "~~~", closed
		// by a fence of the same character at least as long; only the
		// indent is trimmed ("```ls```  " with a trailing space opens a
		// block there, not a code span).
		t := strings.TrimLeft(line, " \t")
		switch {
		case open == "" && isFence(t):
			open, _ = fenceInfo(t)
		case open != "" && closesFence(t, open):
			open = ""
			after = min(at, len(md))
		}
		if !found {
			break
		}
	}
	if open != "" {
		if !strings.HasSuffix(md, "\n") {
			md += "\n"
		}
		return md + open
	}
	// The last paragraph outside code: an odd number of backticks or of
	// "**" leaves a span open.
	// Backticks and "**" inside a closed code block do not count.
	last := md[after:]
	if i := strings.LastIndex(last, "\n\n"); i >= 0 {
		last = last[i:]
	}
	// A marker with nothing after it yet is dropped instead of closed;
	// a code span is closed before the bold run around it.
	code, bold := openSpans(last)
	if code {
		md = closeOrDrop(md, "`")
	}
	if bold {
		md = closeOrDrop(md, "**")
	}
	return md
}

// openSpans reports whether the end of md leaves an inline code span and
// a bold run open: a "**" inside a code span is code, not a marker.
func openSpans(md string) (code, bold bool) {
	for i := 0; i < len(md); i++ {
		switch {
		case md[i] == '`':
			code = !code
		case !code && strings.HasPrefix(md[i:], "**"):
			bold = !bold
			i++
		}
	}
	return code, bold
}

// closeOrDrop ends md with marker: a marker md ends with (nothing after
// it yet) is dropped instead.
func closeOrDrop(md, marker string) string {
	trimmed := strings.TrimRight(md, " ")
	if strings.HasSuffix(trimmed, marker) {
		return strings.TrimSuffix(trimmed, marker)
	}
	if marker == "`" {
		return md + marker
	}
	return trimmed + marker
}
