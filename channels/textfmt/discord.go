package textfmt

import "strings"

// DiscordLimit is the size limit of one Discord message.
const DiscordLimit = 2000

// ToDiscord prepares Markdown as an LLM writes it for a Discord message:
// Discord renders Markdown itself (code fences, emphasis, links, lists,
// headings), so the text stays as it is except that mass mentions
// ("@everyone", "@here") outside code are made inert with a zero-width
// space after the "@", and a table, which Discord does not render, is
// laid out in a code block (table.go). Code blocks and code spans are
// left untouched, so code can still be copied exactly.
func ToDiscord(md string) string {
	md = capAnswer(md)
	if !strings.Contains(md, "@") && !strings.Contains(md, "|") {
		return md
	}
	var b strings.Builder
	b.Grow(len(md) + 16)
	w := newWork(md)
	fence := "" // the open fence, "" outside a fenced block
	lines := strings.SplitAfter(md, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		t := strings.TrimRight(strings.TrimLeft(line, " \t"), "\n")
		switch {
		case fence != "":
			if closesFence(t, fence) {
				fence = ""
			}
			b.WriteString(line)
		case isFence(t):
			fence, _ = fenceInfo(t)
			b.WriteString(line)
		default:
			if text, end, ok := tableAt(lines, i, w); ok {
				b.WriteString("```\n")
				b.WriteString(breakFences(text))
				b.WriteString("\n```")
				if strings.HasSuffix(lines[end-1], "\n") {
					b.WriteByte('\n')
				}
				i = end - 1
				continue
			}
			escapeOutsideSpans(&b, line)
		}
	}
	return b.String()
}

// escapeOutsideSpans writes line with mass mentions escaped outside its
// code spans (a run of backticks up to the next run of the same length).
// The line's backtick runs are indexed once, so a line of unclosed runs
// costs its length, not its length times its runs.
func escapeOutsideSpans(b *strings.Builder, line string) {
	var runs map[int][]int
	pos := 0
	for pos < len(line) {
		i := strings.IndexByte(line[pos:], '`')
		if i < 0 {
			b.WriteString(escapeMassMentions(line[pos:]))
			return
		}
		i += pos
		b.WriteString(escapeMassMentions(line[pos:i]))
		n := run(line, i, '`')
		if runs == nil {
			runs = backtickRuns(line, nil)
		}
		end := nextRun(runs[n], i+n)
		if end < 0 {
			// An unclosed run is literal text.
			b.WriteString(line[i : i+n])
			pos = i + n
			continue
		}
		b.WriteString(line[i : end+n])
		pos = end + n
	}
}

// massMentions are the mentions that ping a whole channel or server.
var massMentions = []string{"everyone", "here"}

// escapeMassMentions inserts a zero-width space after the "@" of every
// mass mention, in any letter case.
func escapeMassMentions(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '@')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+1])
		s = s[i+1:]
		for _, m := range massMentions {
			if len(s) >= len(m) && strings.EqualFold(s[:len(m)], m) {
				b.WriteString("\u200b")
				break
			}
		}
	}
}
