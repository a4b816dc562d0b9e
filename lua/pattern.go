package lua

import "strings"

// Lua 5.1 patterns, matched with the algorithm of the reference
// implementation: recursion follows the pattern, never the subject, so
// the Go stack stays shallow whatever the length of the input (gopher-lua's
// own matcher recurses once per input byte and overflows the Go stack,
// which no recover can catch). Depth is capped at maxMatchDepth, and every
// step counts towards a check of the run's context, so a pathological
// pattern ends at the run's timeout instead of holding the goroutine.

const (
	maxCaptures   = 32
	maxMatchDepth = 200
	capUnfinished = -1
	capPosition   = -2
	// checkEvery is how many matcher steps pass between two looks at the
	// run's context (a power of two).
	checkEvery = 1 << 10
	specials   = "^$*+?.([%-"
)

// patternError is a malformed pattern or a match stopped by its run's
// context; the string functions raise it as a Lua error.
type patternError struct{ msg string }

func (e *patternError) Error() string { return e.msg }

// matcher matches one pattern against one subject.
type matcher struct {
	src, pat string
	level    int
	capture  [maxCaptures]struct{ init, len int }
	depth    int
	steps    int
	// done is the run's context's Done channel (nil: never stops).
	done <-chan struct{}
}

func (m *matcher) fail(msg string) { panic(&patternError{msg}) }

// tick counts one step and stops the match once the run is over.
func (m *matcher) tick() {
	m.steps++
	if m.steps&(checkEvery-1) != 0 || m.done == nil {
		return
	}
	select {
	case <-m.done:
		m.fail("pattern matching interrupted: the hook run was stopped")
	default:
	}
}

// classEnd returns the index just past the single-character class at p.
func (m *matcher) classEnd(p int) int {
	n := len(m.pat)
	c := m.pat[p]
	p++
	switch c {
	case '%':
		if p >= n {
			m.fail("malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if p < n && m.pat[p] == '^' {
			p++
		}
		for {
			if p >= n {
				m.fail("malformed pattern (missing ']')")
			}
			c := m.pat[p]
			p++
			if c == '%' && p < n {
				p++
			}
			if p < n && m.pat[p] == ']' {
				return p + 1
			}
		}
	}
	return p
}

func isalpha(c int) bool  { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isdigit(c int) bool  { return '0' <= c && c <= '9' }
func islower(c int) bool  { return 'a' <= c && c <= 'z' }
func isupper(c int) bool  { return 'A' <= c && c <= 'Z' }
func iscntrl(c int) bool  { return c < 0x20 || c == 0x7f }
func isspace(c int) bool  { return c == ' ' || '\t' <= c && c <= '\r' }
func ispunct(c int) bool  { return 0x21 <= c && c <= 0x7e && !isalpha(c) && !isdigit(c) }
func isxdigit(c int) bool { return isdigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// matchClass reports whether c is in the class %cl (C locale).
func matchClass(c, cl int) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isalpha(c)
	case 'c':
		res = iscntrl(c)
	case 'd':
		res = isdigit(c)
	case 'l':
		res = islower(c)
	case 'p':
		res = ispunct(c)
	case 's':
		res = isspace(c)
	case 'u':
		res = isupper(c)
	case 'w':
		res = isalpha(c) || isdigit(c)
	case 'x':
		res = isxdigit(c)
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if isupper(cl) {
		return !res
	}
	return res
}

// matchBracketClass matches c against the set [..] from p ('[') to ec
// (its ']').
func (m *matcher) matchBracketClass(c, p, ec int) bool {
	sig := true
	if m.pat[p+1] == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case m.pat[p] == '%':
			p++
			if matchClass(c, int(m.pat[p])) {
				return sig
			}
		case m.pat[p+1] == '-' && p+2 < ec:
			p += 2
			if int(m.pat[p-2]) <= c && c <= int(m.pat[p]) {
				return sig
			}
		case int(m.pat[p]) == c:
			return sig
		}
	}
	return !sig
}

// singleMatch matches the byte at s against the class from p to ep.
func (m *matcher) singleMatch(s, p, ep int) bool {
	if s >= len(m.src) {
		return false
	}
	c := int(m.src[s])
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, int(m.pat[p+1]))
	case '[':
		return m.matchBracketClass(c, p, ep-1)
	}
	return int(m.pat[p]) == c
}

// match returns the end of the match of pat[p:] at src[s:], or -1.
func (m *matcher) match(s, p int) int {
	m.depth++
	if m.depth > maxMatchDepth {
		m.fail("pattern too complex")
	}
	defer func() { m.depth-- }()
	for {
		m.tick()
		if p >= len(m.pat) {
			return s
		}
		switch m.pat[p] {
		case '(':
			if p+1 < len(m.pat) && m.pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '$':
			if p+1 == len(m.pat) {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			if p+1 < len(m.pat) {
				switch c := m.pat[p+1]; {
				case c == 'b':
					if s = m.matchBalance(s, p+2); s == -1 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(m.pat) || m.pat[p] != '[' {
						m.fail("missing '[' after '%f' in pattern")
					}
					ep := m.classEnd(p)
					prev, cur := 0, 0
					if s > 0 {
						prev = int(m.src[s-1])
					}
					if s < len(m.src) {
						cur = int(m.src[s])
					}
					if m.matchBracketClass(prev, p, ep-1) || !m.matchBracketClass(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				case isdigit(int(c)):
					if s = m.matchCapture(s, int(c)); s == -1 {
						return -1
					}
					p += 2
					continue
				}
			}
		}
		// A single-character class, maybe with a quantifier.
		ep := m.classEnd(p)
		ok := m.singleMatch(s, p, ep)
		if ep < len(m.pat) {
			switch m.pat[ep] {
			case '?':
				if ok {
					if res := m.match(s+1, ep+1); res != -1 {
						return res
					}
				}
				p = ep + 1
				continue
			case '*':
				return m.maxExpand(s, p, ep)
			case '+':
				if !ok {
					return -1
				}
				return m.maxExpand(s+1, p, ep)
			case '-':
				return m.minExpand(s, p, ep)
			}
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for m.singleMatch(s+i, p, ep) {
		i++
		m.tick()
	}
	for ; i >= 0; i-- {
		if res := m.match(s+i, ep+1); res != -1 {
			return res
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if res := m.match(s, ep+1); res != -1 {
			return res
		}
		if !m.singleMatch(s, p, ep) {
			return -1
		}
		s++
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.fail("too many captures")
	}
	m.capture[m.level].init = s
	m.capture[m.level].len = what
	m.level++
	res := m.match(s, p)
	if res == -1 {
		m.level--
	}
	return res
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.capture[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.fail("invalid pattern capture")
	}
	m.capture[l].len = s - m.capture[l].init
	res := m.match(s, p)
	if res == -1 {
		m.capture[l].len = capUnfinished
	}
	return res
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.fail("unbalanced pattern (missing arguments to '%b')")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	b, e := m.src[s], m.pat[p+1]
	cont := 1
	for s++; s < len(m.src); s++ {
		m.tick()
		switch m.src[s] {
		case e:
			if cont--; cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (m *matcher) matchCapture(s, c int) int {
	l := m.checkCapture(c)
	n := m.capture[l].len
	init := m.capture[l].init
	if len(m.src)-s >= n && m.src[init:init+n] == m.src[s:s+n] {
		return s + n
	}
	return -1
}

func (m *matcher) checkCapture(c int) int {
	l := c - '1'
	if l < 0 || l >= m.level || m.capture[l].len == capUnfinished {
		m.fail("invalid capture index")
	}
	return l
}

// capValue is one capture: a substring, or a position (pos >= 1).
type capValue struct {
	s   string
	pos int
}

// oneCapture returns capture i of the match src[s:e] (the whole match
// when the pattern has no captures and i is 0).
func (m *matcher) oneCapture(i, s, e int) capValue {
	if i >= m.level {
		if i != 0 {
			m.fail("invalid capture index")
		}
		return capValue{s: m.src[s:e]}
	}
	c := m.capture[i]
	switch c.len {
	case capUnfinished:
		m.fail("unfinished capture")
	case capPosition:
		return capValue{pos: c.init + 1}
	}
	return capValue{s: m.src[c.init : c.init+c.len]}
}

// captures returns the captures of the match src[s:e]; with none and
// whole set, the whole match.
func (m *matcher) captures(s, e int, whole bool) []capValue {
	n := m.level
	if n == 0 && whole {
		n = 1
	}
	out := make([]capValue, n)
	for i := range out {
		out[i] = m.oneCapture(i, s, e)
	}
	return out
}

// find searches pat in src from init (0-based) as string.find and
// string.match do: it returns the match's bounds, or start -1.
func (m *matcher) find(init int, anchor bool) (start, end int) {
	for s := init; s <= len(m.src); s++ {
		m.level = 0
		if e := m.match(s, 0); e != -1 {
			return s, e
		}
		if anchor {
			break
		}
	}
	return -1, -1
}

// noSpecials reports whether pat is a plain string to find.
func noSpecials(pat string) bool { return !strings.ContainsAny(pat, specials) }
