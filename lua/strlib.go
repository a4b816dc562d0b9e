package lua

import (
	"fmt"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// The bounded string functions. string.find, match, gmatch and gsub use
// the matcher of pattern.go; string.rep, string.format, gsub and
// table.concat (and the concatenation operator, concat.go) refuse to
// build a string longer than the run's string limit (a quarter of
// plugins.lua.limits.memory_mb), and reserve what they build (memory.go),
// so one call cannot allocate past the memory budget.

// newMatcher makes the matcher of one call, bound to the run's context.
func newMatcher(L *glua.LState, src, pat string) *matcher {
	m := &matcher{src: src, pat: pat}
	if ctx := L.Context(); ctx != nil {
		m.done = ctx.Done()
	}
	return m
}

// guard turns a matcher's panic into a Lua error of function name.
func guard(L *glua.LState, name string) {
	if p := recover(); p != nil {
		if pe, ok := p.(*patternError); ok {
			L.RaiseError("%s: %s", name, pe.msg)
		}
		panic(p)
	}
}

// posrelat turns a Lua string index (negative counts from the end) into
// a 1-based position as Lua 5.1 does.
func posrelat(pos, n int) int {
	if pos < 0 {
		pos += n + 1
	}
	return pos
}

func pushCaptures(L *glua.LState, caps []capValue) int {
	for _, c := range caps {
		pushCapture(L, c)
	}
	return len(caps)
}

func pushCapture(L *glua.LState, c capValue) {
	if c.pos > 0 {
		L.Push(glua.LNumber(c.pos))
		return
	}
	L.Push(glua.LString(c.s))
}

// strFindAux is string.find (find) and string.match (!find).
func strFindAux(L *glua.LState, find bool) int {
	name := "string.match"
	if find {
		name = "string.find"
	}
	src := L.CheckString(1)
	pat := L.CheckString(2)
	init := posrelat(L.OptInt(3, 1), len(src)) - 1
	if init < 0 {
		init = 0
	} else if init > len(src) {
		init = len(src)
	}
	if find && (glua.LVAsBool(L.Get(4)) || noSpecials(pat)) {
		i := strings.Index(src[init:], pat)
		if i < 0 {
			L.Push(glua.LNil)
			return 1
		}
		L.Push(glua.LNumber(init + i + 1))
		L.Push(glua.LNumber(init + i + len(pat)))
		return 2
	}
	defer guard(L, name)
	anchor := strings.HasPrefix(pat, "^")
	if anchor {
		pat = pat[1:]
	}
	m := newMatcher(L, src, pat)
	s, e := m.find(init, anchor)
	if s < 0 {
		L.Push(glua.LNil)
		return 1
	}
	if find {
		L.Push(glua.LNumber(s + 1))
		L.Push(glua.LNumber(e))
		return 2 + pushCaptures(L, m.captures(s, e, false))
	}
	return pushCaptures(L, m.captures(s, e, true))
}

func strFind(L *glua.LState) int  { return strFindAux(L, true) }
func strMatch(L *glua.LState) int { return strFindAux(L, false) }

// strGmatch is string.gmatch: an iterator over the matches.
func strGmatch(L *glua.LState) int {
	src := L.CheckString(1)
	pat := L.CheckString(2)
	pos := 0
	L.Push(L.NewFunction(func(L *glua.LState) int {
		defer guard(L, "string.gmatch")
		m := newMatcher(L, src, pat)
		for s := pos; s <= len(src); s++ {
			m.level = 0
			if e := m.match(s, 0); e != -1 {
				pos = e
				if e == s {
					pos++ // an empty match: go on at least one byte
				}
				return pushCaptures(L, m.captures(s, e, true))
			}
		}
		pos = len(src) + 1
		return 0
	}))
	return 1
}

// gsub builds string.gsub's result within the string limit.
type gsubBuf struct {
	b   strings.Builder
	max int
	L   *glua.LState
	v   *vm
}

func (g *gsubBuf) add(s string) {
	if g.b.Len()+len(s) > g.max {
		g.L.RaiseError("string.gsub: the result would be longer than %d bytes (the string limit of plugins.lua.limits.memory_mb)", g.max)
	}
	g.v.reserve(g.L, len(s))
	g.b.WriteString(s)
}

// strGsub is string.gsub with a replacement string, table or function.
func (v *vm) strGsub(L *glua.LState) int {
	src := L.CheckString(1)
	pat := L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case glua.LTNumber, glua.LTString, glua.LTTable, glua.LTFunction:
	default:
		L.ArgError(3, "string/function/table expected")
	}
	maxN := L.OptInt(4, len(src)+1)
	if s, ok := repl.(glua.LString); ok && pat != "" && noSpecials(pat) && !strings.Contains(string(s), "%") {
		// A plain pattern and replacement: one pass of strings.Replace.
		n := min(strings.Count(src, pat), max(maxN, 0))
		size := len(src) + n*(len(s)-len(pat))
		if size > v.maxString {
			L.RaiseError("string.gsub: the result would be longer than %d bytes (the string limit of plugins.lua.limits.memory_mb)", v.maxString)
		}
		v.reserve(L, size)
		L.Push(glua.LString(strings.Replace(src, pat, string(s), n)))
		L.Push(glua.LNumber(n))
		return 2
	}
	defer guard(L, "string.gsub")
	anchor := strings.HasPrefix(pat, "^")
	if anchor {
		pat = pat[1:]
	}
	m := newMatcher(L, src, pat)
	out := &gsubBuf{max: v.maxString, L: L, v: v}
	s, n := 0, 0
loop:
	for n < maxN {
		m.level = 0
		e := m.match(s, 0)
		if e != -1 {
			n++
			v.gsubValue(L, m, out, repl, s, e)
		}
		switch {
		case e != -1 && e > s:
			s = e
		case s < len(src):
			out.add(src[s : s+1])
			s++
		default:
			break loop
		}
		if anchor {
			break
		}
	}
	out.add(src[s:])
	L.Push(glua.LString(out.b.String()))
	L.Push(glua.LNumber(n))
	return 2
}

// gsubValue appends the replacement of the match src[s:e].
func (v *vm) gsubValue(L *glua.LState, m *matcher, out *gsubBuf, repl glua.LValue, s, e int) {
	var val glua.LValue
	switch r := repl.(type) {
	case glua.LString, glua.LNumber:
		news := glua.LVAsString(r)
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != '%' {
				out.add(news[i : i+1])
				continue
			}
			i++
			switch {
			case i == len(news):
				m.fail("invalid use of '%' in replacement string")
			case news[i] == '0':
				out.add(m.src[s:e])
			case isdigit(int(news[i])):
				c := m.oneCapture(int(news[i]-'1'), s, e)
				if c.pos > 0 {
					out.add(fmt.Sprint(c.pos))
				} else {
					out.add(c.s)
				}
			default:
				out.add(news[i : i+1])
			}
		}
		return
	case *glua.LTable:
		c := m.oneCapture(0, s, e)
		if c.pos > 0 {
			val = L.GetTable(r, glua.LNumber(c.pos))
		} else {
			val = L.GetTable(r, glua.LString(c.s))
		}
	case *glua.LFunction:
		L.Push(r)
		L.Call(pushCaptures(L, m.captures(s, e, true)), 1)
		val = L.Get(-1)
		L.Pop(1)
	}
	switch val.(type) {
	case glua.LString, glua.LNumber:
		out.add(glua.LVAsString(val))
	default:
		if !glua.LVAsBool(val) {
			out.add(m.src[s:e]) // nil or false: keep the match
			return
		}
		m.fail(fmt.Sprintf("invalid replacement value (a %s)", val.Type()))
	}
}

// strRep is string.rep within the string limit.
func (v *vm) strRep(L *glua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || s == "" {
		L.Push(glua.LString(""))
		return 1
	}
	if n > v.maxString/len(s) {
		L.RaiseError("string.rep: %d copies of %d bytes exceed the string limit of %d bytes (plugins.lua.limits.memory_mb)", n, len(s), v.maxString)
	}
	v.reserve(L, n*len(s))
	L.Push(glua.LString(strings.Repeat(s, n)))
	return 1
}

// strFormat checks string.format's directives and arguments as Lua 5.1
// does (widths and precisions of at most two digits, a known option, a
// value for each, a number for a numeric one) and the size of the result
// before gopher-lua's string.format builds it.
func (v *vm) strFormat(L *glua.LState) int {
	f := L.CheckString(1)
	size := len(f)
	arg := 2
	var unsigned []byte // f with each %u made %d, once one is seen
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		flags := 0
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
			flags++
		}
		digits := func() {
			n := 0
			for i < len(f) && isdigit(int(f[i])) {
				i++
				n++
			}
			if n > 2 {
				L.RaiseError("string.format: invalid format (width or precision too long)")
			}
		}
		digits()
		if i < len(f) && f[i] == '.' {
			i++
			digits()
		}
		if flags > 5 || i >= len(f) {
			L.RaiseError("string.format: invalid format %q", f)
		}
		// Lua 5.1's errors where gopher-lua's format (Go's fmt) would
		// put "%!z(…)", "%!s(MISSING)" or a 0 into the text.
		c := f[i]
		if strings.IndexByte("cdiouxXeEfgGqs", c) < 0 {
			L.RaiseError("string.format: invalid option '%%%c' (one of c d i o u x X e E f g G q s)", c)
		}
		if arg > L.GetTop() {
			L.RaiseError("bad argument #%d to 'format' (no value)", arg)
		}
		size += 400 // a number, padded
		if c == 's' || c == 'q' {
			size += 4 * len(L.ToString(arg))
		} else {
			// A numeric string is its number, as in Lua 5.1: Go's
			// fmt would print "255" for %x as the hex of its bytes.
			if n := L.CheckNumber(arg); L.Get(arg).Type() == glua.LTString {
				L.Replace(arg, n)
			}
			if c == 'u' {
				// Go's fmt has no %u: %d prints the same for a
				// number that is not negative.
				if unsigned == nil {
					unsigned = []byte(f)
				}
				unsigned[i] = 'd'
			}
		}
		arg++
	}
	if size > v.maxString {
		L.RaiseError("string.format: the result could be longer than the string limit of %d bytes (plugins.lua.limits.memory_mb)", v.maxString)
	}
	if unsigned != nil {
		L.Replace(1, glua.LString(unsigned))
	}
	v.reserve(L, size)
	return v.format(L)
}

// tableConcat is table.concat within the string limit.
func (v *vm) tableConcat(L *glua.LState) int {
	t := L.CheckTable(1)
	sep := L.OptString(2, "")
	i := L.OptInt(3, 1)
	j := L.OptInt(4, t.Len())
	var b strings.Builder
	for k := i; k <= j; k++ {
		val := t.RawGetInt(k)
		switch val.(type) {
		case glua.LString, glua.LNumber:
		default:
			L.RaiseError("table.concat: invalid value (at index %d) in table for 'concat' (a %s)", k, val.Type())
		}
		s := glua.LVAsString(val)
		if b.Len()+len(s)+len(sep) > v.maxString {
			L.RaiseError("table.concat: the result would be longer than the string limit of %d bytes (plugins.lua.limits.memory_mb)", v.maxString)
		}
		v.reserve(L, len(s)+len(sep))
		b.WriteString(s)
		if k < j {
			b.WriteString(sep)
		}
	}
	L.Push(glua.LString(b.String()))
	return 1
}
