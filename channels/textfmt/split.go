package textfmt

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MinLimit is the smallest part size the splitters accept; smaller limits
// are raised to it (no real platform is that small).
const MinLimit = 64

// Len measures s the way the platforms do at their most conservative:
// in UTF-16 code units (an emoji outside the BMP counts twice).
func Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
		if r == utf8.RuneError {
			n = n - utf16.RuneLen(r) + 1
		}
	}
	return n
}

type atomKind uint8

const (
	atomText  atomKind = iota // one rune of text
	atomWord                  // an indivisible run: an entity like &amp;
	atomOpen                  // an opening tag or code fence
	atomClose                 // its closing counterpart
)

// atom is the unit the splitter never cuts inside.
type atom struct {
	s      string
	kind   atomKind
	w      int
	closer string // for atomOpen: the text that closes it
	cw     int    // Len(closer)
	match  int    // for atomOpen: index of its atomClose (-1 if none); for atomClose: its opener
}

// SplitHTML cuts Telegram HTML (as ToTelegramHTML writes it) into parts
// of at most limit UTF-16 units each, preferring paragraph, then line,
// then word boundaries. A cut inside formatting closes the open tags at
// the end of the part and reopens them, attributes and all (so a code
// block keeps its language), at the start of the next. Tags and entities
// are never cut. Parts with no visible text are dropped.
func SplitHTML(html string, limit int) []string {
	return splitAtoms(htmlAtoms(html, max(limit, MinLimit)), max(limit, MinLimit), true)
}

// SplitMarkdown cuts Markdown into parts of at most limit UTF-16 units,
// preferring paragraph, then line, then word boundaries. A cut inside a
// fenced code block closes the fence at the end of the part and reopens
// it with the same language at the start of the next. Slack and Discord
// use it for their own limits.
func SplitMarkdown(md string, limit int) []string {
	parts, _ := splitMarkdownInto(md, limit, nil)
	return parts
}

// splitMarkdownInto is SplitMarkdown tokenizing into buf's array (grown
// when short), which it returns for the next call: the parts do not
// refer to it.
func splitMarkdownInto(md string, limit int, buf []atom) ([]string, []atom) {
	limit = max(limit, MinLimit)
	atoms := markdownAtoms(md, limit, buf)
	return splitAtoms(atoms, limit, false), atoms
}

// htmlAtoms tokenizes HTML into tags, entities and runes, and pairs each
// opening tag with its closing one. Tags too long to carry into a second
// part (a limit/4) are dropped as a pair; their text stays.
func htmlAtoms(s string, limit int) []atom {
	atoms := make([]atom, 0, len(s))
	var stack []int
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				atoms = append(atoms, atom{s: "&lt;", kind: atomWord, w: 4, match: -1})
				i++
				continue
			}
			tag := s[i : i+end+1]
			i += end + 1
			if strings.HasPrefix(tag, "</") {
				a := atom{s: tag, kind: atomClose, w: Len(tag), match: -1}
				if n := len(stack); n > 0 {
					a.match = stack[n-1]
					atoms[stack[n-1]].match = len(atoms)
					stack = stack[:n-1]
				}
				atoms = append(atoms, a)
				continue
			}
			name := tagName(tag)
			closer := "</" + name + ">"
			stack = append(stack, len(atoms))
			atoms = append(atoms, atom{s: tag, kind: atomOpen, w: Len(tag), closer: closer, cw: len(closer), match: -1})
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 || end > 10 {
				atoms = append(atoms, atom{s: "&amp;", kind: atomWord, w: 5, match: -1})
				i++
				continue
			}
			atoms = append(atoms, atom{s: s[i : i+end+1], kind: atomWord, w: end + 1, match: -1})
			i += end + 1
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			r := s[i : i+size]
			atoms = append(atoms, atom{s: r, kind: atomText, w: Len(r), match: -1})
			i += size
		}
	}
	// Unclosed tags get a closer at the end; oversized tags are dropped.
	for _, o := range stack {
		atoms[o].match = len(atoms)
		atoms = append(atoms, atom{s: atoms[o].closer, kind: atomClose, w: atoms[o].cw, match: o})
	}
	out := make([]atom, 0, len(atoms))
	drop := make([]bool, len(atoms))
	for i, a := range atoms {
		if a.kind == atomOpen && (a.w+a.cw)*4 > limit {
			drop[i] = true
			if a.match >= 0 {
				drop[a.match] = true
			}
		}
	}
	for i, a := range atoms {
		if !drop[i] {
			out = append(out, a)
			continue
		}
		if a.kind == atomClose && a.match >= 0 && tagName(atoms[a.match].s) == "a" {
			// Keep a dropped link's target visible as text.
			out = append(out, textAtoms(" ("+attr(atoms[a.match].s, "href")+")")...)
		}
	}
	// Re-pair after dropping: a simple stack pass is exact because the
	// kept tags are still properly nested.
	var st []int
	for i := range out {
		switch out[i].kind {
		case atomOpen:
			out[i].match = -1
			st = append(st, i)
		case atomClose:
			out[i].match = -1
			if n := len(st); n > 0 {
				out[i].match = st[n-1]
				out[st[n-1]].match = i
				st = st[:n-1]
			}
		}
	}
	return out
}

// textAtoms tokenizes escaped text (no tags) into entities and runes.
func textAtoms(s string) []atom {
	var out []atom
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if end := strings.IndexByte(s[i:], ';'); end > 0 && end <= 10 {
				out = append(out, atom{s: s[i : i+end+1], kind: atomWord, w: end + 1, match: -1})
				i += end + 1
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		r := s[i : i+size]
		out = append(out, atom{s: r, kind: atomText, w: Len(r), match: -1})
		i += size
	}
	return out
}

func tagName(tag string) string {
	t := strings.TrimPrefix(strings.TrimSuffix(tag, ">"), "<")
	if i := strings.IndexAny(t, " \t\n/"); i >= 0 {
		t = t[:i]
	}
	return t
}

// markdownAtoms tokenizes Markdown: fence lines are open/close atoms,
// everything else runes. A fence line too long to repeat in every part
// (over limit/4) is left as text, and so is its closing fence.
func markdownAtoms(md string, limit int, buf []atom) []atom {
	atoms := buf[:0]
	if cap(atoms) < len(md)+1 {
		atoms = make([]atom, 0, len(md)+1) // at most one a byte, and a closer
	}
	open := -1
	untracked := false
	lines := strings.SplitAfter(md, "\n")
	for _, line := range lines {
		t := strings.TrimRight(strings.TrimLeft(line, " \t"), "\n")
		switch {
		case !isFence(t):
		case untracked:
			untracked = false
		case open < 0 && Len(line)*4 > limit:
			untracked = true
		case open < 0:
			fence, _ := fenceInfo(t)
			open = len(atoms)
			closer := "\n" + fence
			atoms = append(atoms, atom{s: line, kind: atomOpen, w: Len(line), closer: closer, cw: Len(closer), match: -1})
			continue
		case closesFence(t, atoms[open].closer[1:]):
			body := strings.TrimRight(line, "\n")
			atoms = append(atoms, atom{s: body, kind: atomClose, w: Len(body), match: open})
			atoms[open].match = len(atoms) - 1
			open = -1
			if len(body) < len(line) {
				atoms = append(atoms, atom{s: "\n", kind: atomText, w: 1, match: -1})
			}
			continue
		}
		for _, r := range line {
			s := string(r)
			atoms = append(atoms, atom{s: s, kind: atomText, w: Len(s), match: -1})
		}
	}
	if open >= 0 {
		atoms = append(atoms, endFence(atoms, open))
	}
	return atoms
}

// endFence is the atom that closes a fence left open at the end of the
// text: its closer, without the newline when the text ends with one.
func endFence(atoms []atom, open int) atom {
	c := atoms[open].closer
	if last := atoms[len(atoms)-1]; last.kind == atomText && last.s == "\n" {
		c = strings.TrimPrefix(c, "\n")
	}
	atoms[open].match = len(atoms)
	return atom{s: c, kind: atomClose, w: Len(c), match: open}
}

// breakQuality rates a cut before atoms[k]: 3 after a blank line, 2 after
// a newline, 1 after a space, 0 anywhere else.
func breakQuality(atoms []atom, k int) int {
	if k == 0 || atoms[k-1].kind != atomText {
		return 0
	}
	switch atoms[k-1].s {
	case "\n":
		if k >= 2 && atoms[k-2].s == "\n" {
			return 3
		}
		return 2
	case " ", "\t":
		return 1
	}
	return 0
}

// splitAtoms is the greedy splitter shared by the formats.
func splitAtoms(atoms []atom, limit int, trimHTML bool) []string {
	var parts []string
	var prefix []int // open atoms to reopen at the start of the part
	skip := make([]bool, len(atoms))
	from := 0
	for from < len(atoms) {
		// Keep the carried formatting small enough to make progress.
		for len(prefix) > 0 && stackWidth(atoms, prefix) > limit/2 {
			skip[atoms[prefix[0]].match] = true
			prefix = prefix[1:]
		}
		stack := append([]int(nil), prefix...)
		width := 0
		for _, o := range prefix {
			width += atoms[o].w
		}
		suffix := closersWidth(atoms, stack)
		k := from
		var last [4]int // last break position of each quality
		for ; k < len(atoms); k++ {
			a := atoms[k]
			if skip[k] {
				continue
			}
			newSuffix := suffix
			switch a.kind {
			case atomOpen:
				newSuffix += a.cw
			case atomClose:
				newSuffix -= atoms[a.match].cw
			}
			if k > from {
				last[breakQuality(atoms, k)] = k
			}
			if width+a.w+newSuffix > limit && k > from {
				break
			}
			width += a.w
			suffix = newSuffix
			switch a.kind {
			case atomOpen:
				stack = append(stack, k)
			case atomClose:
				if n := len(stack); n > 0 {
					stack = stack[:n-1]
				}
			}
		}
		cut := k
		if k < len(atoms) {
			cut = chooseCut(last, from, k)
		}
		// Rebuild the part up to cut with its closing tags.
		var b strings.Builder
		st := append([]int(nil), prefix...)
		for _, o := range prefix {
			b.WriteString(atoms[o].s)
		}
		for j := from; j < cut; j++ {
			if skip[j] {
				continue
			}
			a := atoms[j]
			b.WriteString(a.s)
			switch a.kind {
			case atomOpen:
				st = append(st, j)
			case atomClose:
				if n := len(st); n > 0 {
					st = st[:n-1]
				}
			}
		}
		body := b.String()
		if len(st) == 0 {
			body = strings.TrimRight(body, " \t\n")
		} else {
			// Cut at a line break inside a block: the block ends with its
			// last line, not an empty one (a fence's closer brings its
			// own line break).
			body = strings.TrimRight(body, "\n")
		}
		for j := len(st) - 1; j >= 0; j-- {
			body += atoms[st[j]].closer
		}
		if visible(body, trimHTML) {
			parts = append(parts, body)
		}
		prefix = st
		from = cut
		if len(prefix) == 0 {
			for from < len(atoms) && atoms[from].kind == atomText && strings.TrimSpace(atoms[from].s) == "" {
				from++
			}
		}
	}
	return parts
}

// chooseCut picks where to end a part that overflows at k: the best
// boundary in the last 70% of the part, else any boundary, else k.
func chooseCut(last [4]int, from, k int) int {
	threshold := from + (k-from)*3/10
	for q := 3; q >= 1; q-- {
		if last[q] > threshold {
			return last[q]
		}
	}
	for q := 3; q >= 1; q-- {
		if last[q] > from {
			return last[q]
		}
	}
	return k
}

func stackWidth(atoms []atom, st []int) int {
	n := 0
	for _, o := range st {
		n += atoms[o].w + atoms[o].cw
	}
	return n
}

func closersWidth(atoms []atom, st []int) int {
	n := 0
	for _, o := range st {
		n += atoms[o].cw
	}
	return n
}

// visible reports whether a part shows anything but whitespace.
func visible(part string, isHTML bool) bool {
	if isHTML {
		part = HTMLToPlain(part)
	}
	return strings.TrimSpace(part) != ""
}
