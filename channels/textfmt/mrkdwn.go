package textfmt

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ToSlackMrkdwn converts Markdown as LLMs write it into Slack's mrkdwn:
// **bold** and # headings become *bold*, *italic* and _italic_ become
// _italic_, ~~strike~~ becomes ~strike~, `code` and fenced blocks stay
// (without the language, which Slack would show as text), [label](url)
// becomes <url|label>, list bullets become "• ", > quotes stay. Outside
// the link syntax &, < and > are escaped as &amp; &lt; &gt;, so no text
// the LLM writes can turn into a mention (<@U…>, <!channel>) or a link.
func ToSlackMrkdwn(md string) string { return render(md, &mrkdwnRenderer{}) }

// mrkdwnRenderer writes Slack mrkdwn. Slack does not nest one marker in
// itself, so an inner bold inside bold (a heading's **x**) is left out.
type mrkdwnRenderer struct {
	depth map[string]int
}

var mrkdwnMarkers = map[string]string{"b": "*", "i": "_", "s": "~"}

func (r *mrkdwnRenderer) text(b *strings.Builder, s string) { slackEscapeTo(b, s) }

func (r *mrkdwnRenderer) open(b *strings.Builder, tag string) {
	if r.depth == nil {
		r.depth = map[string]int{}
	}
	r.depth[tag]++
	if r.depth[tag] == 1 {
		b.WriteString(mrkdwnMarkers[tag])
	}
}

func (r *mrkdwnRenderer) close(b *strings.Builder, tag string) {
	r.depth[tag]--
	if r.depth[tag] == 0 {
		b.WriteString(mrkdwnMarkers[tag])
	}
}

func (r *mrkdwnRenderer) link(b *strings.Builder, label func(), url string) {
	// The label is escaped text, so it cannot end the reference early.
	b.WriteByte('<')
	b.WriteString(slackURL(url))
	b.WriteByte('|')
	label()
	b.WriteByte('>')
}

func (r *mrkdwnRenderer) codeSpan(b *strings.Builder, code string) {
	b.WriteByte('`')
	slackEscapeTo(b, code)
	b.WriteByte('`')
}

func (r *mrkdwnRenderer) codeBlock(b *strings.Builder, _, code string) {
	b.WriteString("```\n")
	slackEscapeTo(b, code)
	b.WriteString("\n```")
}

func (r *mrkdwnRenderer) quote(b *strings.Builder, body func(*strings.Builder)) {
	prefixLines(b, body, "> ")
}

func (r *mrkdwnRenderer) table(b *strings.Builder, text string) {
	r.codeBlock(b, "", breakFences(text))
}

func (r *mrkdwnRenderer) bullet() string { return "• " }

func slackEscapeTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(s[i])
		}
	}
}

// slackURL writes a link target for <url|label>: & escaped, and the
// characters that would end the link percent-encoded.
func slackURL(u string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C", " ", "%20")
	return r.Replace(u)
}

// SplitSlackMrkdwn cuts mrkdwn (as ToSlackMrkdwn writes it) into parts of
// at most limit UTF-16 units, preferring paragraph, then line, then word
// boundaries. A cut inside a ``` block closes it at the end of the part
// and reopens it at the start of the next; an entity (&amp;) or a link,
// mention or channel reference (<…>) is never cut.
func SplitSlackMrkdwn(s string, limit int) []string {
	limit = max(limit, MinLimit)
	return splitAtoms(mrkdwnAtoms(s, limit), limit, false)
}

// mrkdwnAtoms tokenizes mrkdwn: fence lines are open/close atoms, entities
// and <…> references single words, everything else runes. A reference
// longer than limit/2 is left as runes, so one atom always fits a part.
func mrkdwnAtoms(s string, limit int) []atom {
	atoms := make([]atom, 0, len(s)+1) // at most one a byte, and a closer
	open := -1
	for _, line := range strings.SplitAfter(s, "\n") {
		t := strings.TrimRight(strings.TrimLeft(line, " \t"), "\n")
		if t == "```" {
			if open < 0 {
				open = len(atoms)
				atoms = append(atoms, atom{s: line, kind: atomOpen, w: Len(line), closer: "\n```", cw: 4, match: -1})
				continue
			}
			body := strings.TrimRight(line, "\n")
			atoms = append(atoms, atom{s: body, kind: atomClose, w: Len(body), match: open})
			atoms[open].match = len(atoms) - 1
			open = -1
			if len(body) < len(line) {
				atoms = append(atoms, atom{s: "\n", kind: atomText, w: 1, match: -1})
			}
			continue
		}
		for i := 0; i < len(line); {
			if w := slackWordAt(line, i, limit); w > 0 {
				atoms = append(atoms, atom{s: line[i : i+w], kind: atomWord, w: Len(line[i : i+w]), match: -1})
				i += w
				continue
			}
			_, size := utf8.DecodeRuneInString(line[i:])
			atoms = append(atoms, atom{s: line[i : i+size], kind: atomText, w: Len(line[i : i+size]), match: -1})
			i += size
		}
	}
	if open >= 0 {
		atoms = append(atoms, endFence(atoms, open))
	}
	return atoms
}

// slackWordAt returns the length of the entity or <…> reference starting
// at s[i], or 0.
func slackWordAt(s string, i, limit int) int {
	switch s[i] {
	case '&':
		for _, e := range []string{"&amp;", "&lt;", "&gt;"} {
			if strings.HasPrefix(s[i:], e) {
				return len(e)
			}
		}
	case '<':
		end := strings.IndexAny(s[i+1:], "<>\n")
		if end >= 0 && s[i+1+end] == '>' && Len(s[i:i+end+2])*2 <= limit {
			return end + 2
		}
	}
	return 0
}

// ValidateSlackMrkdwn reports the first problem that would make Slack show
// a part differently from what ToSlackMrkdwn meant: a ``` block left open,
// a bare & that starts no entity, a < that opens no reference, a > that
// closes none (a > at the start of a line is a quote).
func ValidateSlackMrkdwn(s string) error {
	fences := 0
	for n, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "```" {
			fences++
			continue
		}
		for i := 0; i < len(line); i++ {
			switch line[i] {
			case '&':
				if slackWordAt(line, i, 1<<30) == 0 {
					return fmt.Errorf("line %d: a bare & at byte %d (write &amp;)", n+1, i)
				}
			case '<':
				w := slackWordAt(line, i, 1<<30)
				if w == 0 {
					return fmt.Errorf("line %d: a < at byte %d opens no <…> reference (write &lt;)", n+1, i)
				}
				i += w - 1
			case '>':
				if strings.TrimLeft(line[:i], " ") != "" {
					return fmt.Errorf("line %d: a bare > at byte %d (write &gt;)", n+1, i)
				}
			}
		}
	}
	if fences%2 != 0 {
		return errors.New("a ``` block is not closed")
	}
	return nil
}

// FromSlack turns the text of a Slack message into plain text for the
// LLM: <@U123> becomes "@name" (user returns the name, "" keeps the id),
// <#C123|general> "#general", <!here> "@here", <!subteam^S1|@team>
// "@team", <url|label> "label (url)", <url> the url (mailto: dropped), and
// &amp; &lt; &gt; their characters.
func FromSlack(text string, user func(id string) string) string {
	var b strings.Builder
	// gt is the first '>' after the last '<' looked at (-1: none left,
	// -2: not looked for yet): each '<' does not scan the rest again.
	gt := -2
	for i := 0; i < len(text); {
		c := text[i]
		if c == '&' {
			if w := slackWordAt(text, i, 1<<30); w > 0 {
				b.WriteString(map[string]string{"&amp;": "&", "&lt;": "<", "&gt;": ">"}[text[i:i+w]])
				i += w
				continue
			}
		}
		if c == '<' {
			if gt == -2 || gt >= 0 && gt <= i {
				gt = strings.IndexByte(text[i+1:], '>')
				if gt >= 0 {
					gt += i + 1
				}
			}
			if gt > i && isSlackReference(text[i+1:gt]) {
				b.WriteString(slackReference(text[i+1:gt], user))
				i = gt + 1
				continue
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// isSlackReference reports whether the inside of <…> is a reference: a
// target without spaces, then an optional |label, on one line.
func isSlackReference(ref string) bool {
	// The quick refusal first: a '<' after many others is found at once.
	if strings.ContainsAny(ref, "<\n") {
		return false
	}
	target, _, _ := strings.Cut(ref, "|")
	return target != "" && !strings.ContainsAny(target, " \t")
}

// slackReference renders the inside of one <…> reference.
func slackReference(ref string, user func(id string) string) string {
	target, label, hasLabel := strings.Cut(ref, "|")
	unescape := func(s string) string { return FromSlack(s, nil) }
	switch {
	case strings.HasPrefix(target, "@"):
		if hasLabel && label != "" {
			return "@" + strings.TrimPrefix(unescape(label), "@")
		}
		if user != nil {
			if name := user(target[1:]); name != "" {
				return "@" + strings.TrimPrefix(name, "@")
			}
		}
		return target
	case strings.HasPrefix(target, "#"):
		if hasLabel && label != "" {
			return "#" + unescape(label)
		}
		return target
	case strings.HasPrefix(target, "!"):
		if hasLabel && label != "" {
			return unescape(label)
		}
		name, _, _ := strings.Cut(target[1:], "^")
		return "@" + name
	}
	url := unescape(target)
	if !hasLabel {
		return strings.TrimPrefix(url, "mailto:")
	}
	label = unescape(label)
	if label == url || "mailto:"+label == url {
		return label
	}
	return label + " (" + url + ")"
}
