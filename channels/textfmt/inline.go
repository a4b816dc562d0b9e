package textfmt

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Inline Markdown in linear time. Each construct is matched
// opener-to-closer and its inside rendered recursively, so the output's
// tags are balanced by construction. A scan for a closer that never comes
// (64 KB of "[" or of "*a ") used to run to the end of the text for every
// opener: 64k characters took seconds, 200k nearly two minutes. Here
// every such scan is answered from an index built in one pass (the
// backtick runs, the brackets' pairs) or from the result of the previous
// scan for the same closer (the walk goes left to right, so a closer not
// found from one opener is not there for the next), and a construct
// nested deeper than maxNest is shown as text: rendering costs a few
// steps per byte of the answer, whatever it holds.

// maxNest bounds the nesting of emphasis and link labels.
const maxNest = 8

// inline renders s with inline formatting.
func inline(b *strings.Builder, r renderer, s string, w *work) {
	p := inliner{b: b, r: r, s: s, w: w}
	p.render(0)
}

// work counts the steps of a rendering (tests check it grows linearly),
// and holds the padding its tables may still add (table.go).
type work struct {
	steps int
	room  int
}

// newWork is the work of rendering md: its tables may add padding up to
// half md's size plus tableRoom.
func newWork(md string) *work { return &work{room: len(md)/2 + tableRoom} }

func (w *work) add(n int) {
	if w != nil {
		w.steps += n
	}
}

// inliner renders one piece of inline text.
type inliner struct {
	b *strings.Builder
	r renderer
	s string
	w *work
	// ticks are the starts of the maximal runs of backticks by length;
	// nil until the first backtick is looked at.
	ticks map[int][]int
	// pairs maps a '[' to its ']' on the same line (-1: none); nil until
	// the first link is looked at.
	pairs map[int]int
	// at are the positions of ')' and '>', each indexed in one pass when
	// first asked for.
	at      [2][]int
	indexed [2]bool
	// emph are the last scans for an emphasis closer, by marker and width.
	emph map[emphKey]scan
}

type scan struct{ from, at int }

type emphKey struct {
	c     byte
	width int
}

// sub renders s, a part of p's text, as p does, one level deeper; past
// maxNest it is text.
func (p *inliner) sub(s string, depth int) {
	if depth >= maxNest {
		p.r.text(p.b, s)
		p.w.add(len(s))
		return
	}
	q := inliner{b: p.b, r: p.r, s: s, w: p.w}
	q.render(depth)
}

func (p *inliner) render(depth int) {
	b, r, s := p.b, p.r, p.s
	lit := 0 // start of pending literal text
	flush := func(end int) {
		if end > lit {
			r.text(b, s[lit:end])
		}
	}
	for i := 0; i < len(s); {
		p.w.add(1)
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) && strings.IndexByte("\\`*_~[]()#>-+!|.", s[i+1]) >= 0 {
				flush(i)
				r.text(b, s[i+1:i+2])
				i += 2
				lit = i
				continue
			}
		case '`':
			n := run(s, i, '`')
			if end := p.tickRun(i+n, n); end >= 0 {
				flush(i)
				code := s[i+n : end]
				if len(code) > 2 && code[0] == ' ' && code[len(code)-1] == ' ' {
					code = code[1 : len(code)-1]
				}
				r.codeSpan(b, code)
				i = end + n
				lit = i
				continue
			}
			i += n
			continue
		case '[':
			if label, url, end, ok := p.linkAt(i); ok {
				flush(i)
				if strings.TrimSpace(label) == "" {
					label = url
				}
				if len(url) > maxHrefLen {
					p.sub(label, depth+1)
					r.text(b, " ("+url+")")
				} else {
					r.link(b, func() { p.sub(label, depth+1) }, url)
				}
				i = end
				lit = i
				continue
			}
		case '<':
			if end := p.find(1, '>', i); end > i {
				u := s[i+1 : end]
				if safeURL(u) && !strings.ContainsAny(u, " <") && len(u) <= maxHrefLen {
					flush(i)
					r.link(b, func() { r.text(b, u) }, u)
					i = end + 1
					lit = i
					continue
				}
			}
		case '*', '_', '~':
			if tag, inner, end, ok := p.emphasisAt(i); ok {
				flush(i)
				r.open(b, tag)
				p.sub(inner, depth+1)
				r.close(b, tag)
				i = end
				lit = i
				continue
			}
			i += run(s, i, c)
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	flush(len(s))
}

func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// findRun finds a run of exactly n c's at or after from.
func findRun(s string, from int, c byte, n int) int {
	for i := from; i < len(s); {
		if s[i] == c {
			m := run(s, i, c)
			if m == n {
				return i
			}
			i += m
			continue
		}
		i++
	}
	return -1
}

// backtickRuns indexes the maximal runs of backticks of s by length.
func backtickRuns(s string, w *work) map[int][]int {
	runs := map[int][]int{}
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			w.add(len(s) - i)
			break
		}
		i += j
		n := run(s, i, '`')
		w.add(j + n)
		runs[n] = append(runs[n], i)
		i += n
	}
	return runs
}

// tickRun is findRun for backticks, from the index.
func (p *inliner) tickRun(from, n int) int {
	if p.ticks == nil {
		p.ticks = backtickRuns(p.s, p.w)
	}
	return nextRun(p.ticks[n], from)
}

// nextRun is the first of the sorted starts at or after from, or -1.
func nextRun(starts []int, from int) int {
	k := sort.SearchInts(starts, from)
	if k == len(starts) {
		return -1
	}
	return starts[k]
}

// find returns the first c (')' in slot 0, '>' in slot 1) at or after
// from, or -1, from an index of its positions.
func (p *inliner) find(slot int, c byte, from int) int {
	if !p.indexed[slot] {
		p.indexed[slot] = true
		for i := 0; ; i++ {
			j := strings.IndexByte(p.s[i:], c)
			if j < 0 {
				p.w.add(len(p.s) - i)
				break
			}
			p.w.add(j + 1)
			i += j
			p.at[slot] = append(p.at[slot], i)
		}
	}
	return nextRun(p.at[slot], from)
}

// linkAt matches [label](url) starting at i.
func (p *inliner) linkAt(i int) (label, url string, end int, ok bool) {
	s := p.s
	if p.pairs == nil {
		p.pairs = bracketPairs(s, p.w)
	}
	j := p.pairs[i]
	if j <= 0 || j+1 >= len(s) || s[j+1] != '(' {
		return "", "", 0, false
	}
	close := p.find(0, ')', j+2)
	if close < 0 {
		return "", "", 0, false
	}
	close = p.balanced(j+2, close)
	url = strings.TrimSpace(s[j+2 : close])
	if t, _, found := strings.Cut(url, " "); found {
		url = t // drop a "title"
	}
	if !safeURL(url) {
		return "", "", 0, false
	}
	return s[i+1 : j], url, close + 1, true
}

// Bounds of balanced: how many more ')' a link's destination may take in,
// within how many bytes past its first ')'.
const (
	maxDestParens = 3
	maxDestExtend = 256
)

// balanced returns where the destination of a link that starts at from
// ends, given close, the first ')' after it. A destination may hold
// balanced parentheses, as Wikipedia's .../Go_(programming_language)
// does: while those it opens outnumber those it closes, it ends at a
// later ')', when that comes with no space between (a URL has none) and
// within the bounds above; otherwise at close, as before.
func (p *inliner) balanced(from, close int) int {
	s := p.s
	dest := s[from:close]
	opens := strings.Count(dest, "(")
	if opens == 0 || strings.ContainsAny(dest, " \t\n") {
		return close
	}
	end, closes := close, 0
	for k := 0; opens > closes; k++ {
		next := p.find(0, ')', end+1)
		if k == maxDestParens || next < 0 || next-close > maxDestExtend || strings.ContainsAny(s[end+1:next], " \t\n") {
			return close
		}
		p.w.add(next - end)
		closes++ // the one at end
		opens += strings.Count(s[end+1:next], "(")
		end = next
	}
	return end
}

// bracketPairs pairs each '[' of s with its ']' on the same line (-1 when
// it has none), in one pass.
func bracketPairs(s string, w *work) map[int]int {
	pairs := map[int]int{}
	var open []int
	for i := 0; i < len(s); i++ {
		w.add(1)
		switch s[i] {
		case '[':
			open = append(open, i)
			pairs[i] = -1
		case ']':
			if n := len(open); n > 0 {
				pairs[open[n-1]] = i
				open = open[:n-1]
			}
		case '\n':
			open = open[:0]
		}
	}
	return pairs
}

// emphasisAt matches **x**, __x__, *x*, _x_ and ~~x~~ starting at i.
func (p *inliner) emphasisAt(i int) (tag, inner string, end int, ok bool) {
	s := p.s
	c := s[i]
	n := run(s, i, c)
	var width int
	switch {
	case c == '~' && n == 2:
		tag, width = "s", 2
	case c == '~':
		return "", "", 0, false
	case n == 2:
		tag, width = "b", 2
	case n == 1:
		tag, width = "i", 1
	case n >= 3:
		// ***x*** is bold around italic: take the outer ** here.
		tag, width = "b", 2
	default:
		return "", "", 0, false
	}
	if c == '_' && i > 0 && isWordByte(s[i-1]) {
		return "", "", 0, false // snake_case
	}
	start := i + width
	if start >= len(s) || s[start] == ' ' || s[start] == '\n' {
		return "", "", 0, false
	}
	closeAt := p.emphasisCloser(c, width, start)
	if closeAt < 0 {
		return "", "", 0, false
	}
	return tag, s[start:closeAt], closeAt + width, true
}

// emphasisCloser finds the closer of an emphasis of c and width whose
// inside starts at start: the first run of c that can close it, outside
// code spans. A scan that found nothing from one start finds nothing
// from a later one, and one that found a closer at k finds it from any
// start up to k: the last scan per marker answers those.
func (p *inliner) emphasisCloser(c byte, width, start int) int {
	key := emphKey{c, width}
	if last, ok := p.emph[key]; ok && start >= last.from && (last.at < 0 || start < last.at) {
		return last.at
	}
	at := p.scanCloser(c, width, start)
	if p.emph == nil {
		p.emph = map[emphKey]scan{}
	}
	p.emph[key] = scan{start, at}
	return at
}

func (p *inliner) scanCloser(c byte, width, start int) int {
	s := p.s
	for j := start; j < len(s); {
		p.w.add(1)
		switch s[j] {
		case '`':
			m := run(s, j, '`')
			if e := p.tickRun(j+m, m); e >= 0 {
				j = e + m
				continue
			}
			j += m
			continue
		case '\\':
			j += 2
			continue
		case c:
			m := run(s, j, c)
			closeAt := -1
			switch {
			case m == width:
				closeAt = j
			case m > width && (width == 2 || m == 3):
				// "***" closing "**" after an inner "*": the closer is the last two.
				closeAt = j + m - width
			}
			if closeAt > start && s[closeAt-1] != ' ' && s[closeAt-1] != '\n' {
				after := closeAt + width
				if c == '_' && after < len(s) && isWordByte(s[after]) {
					j += m
					continue
				}
				return closeAt
			}
			j += m
			continue
		}
		j++
	}
	return -1
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
