package guard

// The forbidden shapes, matched on a view (view.go). Keywords are
// matched letter by letter: whitespace runs (line breaks included) and
// the separators '_', '-' and '.' between two letters are ignored, so
// "tool_call", "TOOL CALL", "tool-\ncall" and "toolcall" are one
// keyword. Every matcher is bounded: a keyword has at most maxKeyword
// letters and maxSeparators separator runs, an attribute list at most
// maxAttr bytes, so the scan is linear in the text.

import "sync"

const (
	maxKeyword    = 32
	maxSeparators = 64
	maxAttr       = 256
	maxToken      = 64
)

// kind says how a match is neutralized.
type kind uint8

const (
	kindShape       kind = iota // replaced by Removed
	kindMarkerOpen              // replaced by "(plugin_output)"
	kindMarkerClose             // replaced by "(/plugin_output)"
)

// trie is a set of keywords over [a-z0-9].
type trie struct {
	next [][36]int16
	term []int16 // keyword id + 1 at a node, 0 = none
	ids  []string
}

func newTrie(words ...string) *trie {
	t := &trie{next: make([][36]int16, 1), term: make([]int16, 1)}
	for _, w := range words {
		n := 0
		for i := 0; i < len(w); i++ {
			s := sym(w[i])
			if s < 0 {
				panic("guard: keyword " + w + " has a character outside [a-z0-9]")
			}
			if t.next[n][s] == 0 {
				t.next = append(t.next, [36]int16{})
				t.term = append(t.term, 0)
				t.next[n][s] = int16(len(t.next) - 1)
			}
			n = int(t.next[n][s])
		}
		t.ids = append(t.ids, w)
		t.term[n] = int16(len(t.ids))
	}
	return t
}

func sym(c byte) int {
	switch {
	case c >= 'a' && c <= 'z':
		return int(c - 'a')
	case c >= '0' && c <= '9':
		return int(c-'0') + 26
	}
	return -1
}

func isSep(c byte) bool { return c == '_' || c == '-' || c == '.' }
func isWS(c byte) bool  { return c == ' ' || c == '\n' }

// longest matches the longest keyword of t at b[i:] that ends on a word
// boundary; it returns the keyword and the index just after its last
// letter, or "" when none matches.
func (t *trie) longest(b []byte, i int) (string, int) {
	node, seps, letters := 0, 0, 0
	best, end := "", -1
	for p := i; p < len(b); {
		c := b[p]
		if isWS(c) || isSep(c) {
			seps++
			if seps > maxSeparators {
				break
			}
			for p < len(b) && (isWS(b[p]) || isSep(b[p])) {
				p++
			}
			continue
		}
		s := sym(c)
		if s < 0 || letters == maxKeyword {
			break
		}
		nx := int(t.next[node][s])
		if nx == 0 {
			break
		}
		node = nx
		letters++
		p++
		if t.term[node] != 0 && boundary(b, p) {
			best, end = t.ids[t.term[node]-1], p
		}
	}
	return best, end
}

// boundary reports whether a keyword ending at b[p] ends a word: what
// follows (past '_', '-' and '.') is not a letter or digit.
func boundary(b []byte, p int) bool {
	for p < len(b) && isSep(b[p]) {
		p++
	}
	return p >= len(b) || sym(b[p]) < 0
}

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func skipWSSep(b []byte, i int) int {
	for i < len(b) && (isWS(b[i]) || isSep(b[i])) {
		i++
	}
	return i
}

func at(b []byte, i int, c byte) bool { return i < len(b) && b[i] == c }

// Keyword sets. The wrapper's own marker is "pluginoutput". Built at the
// first scan of a plugin's output, not at start.
type keywordSets struct {
	bracketWords, angleWords, jsonKeys, lineWords, fenceWords, sysWord *trie
	jsonValues                                                         map[string]*trie
}

var keywords = sync.OnceValue(func() *keywordSets {
	return &keywordSets{
		bracketWords: newTrie("toolcall", "toolcalls", "tooluse", "toolresult", "toolresults",
			"tooloutput", "tooloutputs", "toolresponse", "toolcode", "functioncall", "functioncalls",
			"functionresult", "functionresults", "functionoutput", "availabletools", "inst",
			"systemprompt", "pluginoutput", "pluginresult", "pluginresponse"),
		angleWords: newTrie("toolcall", "toolcalls", "tooluse", "toolresult", "toolresults",
			"tooloutput", "tooloutputs", "toolresponse", "toolcode", "functioncall", "functioncalls",
			"functionresult", "functionresults", "functionoutput", "function", "functions",
			"invoke", "parametername", "parameter", "pluginoutput", "pluginresult", "pluginresponse",
			"startofturn", "endofturn", "imstart", "imend", "availabletools"),
		// JSON keys that make a tool call or result whatever their value.
		jsonKeys: newTrie("toolcalls", "toolcall", "functioncall", "functioncalls", "toolcallid",
			"tooluseid", "functionresponse", "function", "type", "role", "stopreason", "finishreason"),
		// The values that make "type", "role", "stop_reason" and
		// "finish_reason" a tool-call or role-message shape.
		jsonValues: map[string]*trie{
			"type": newTrie("function", "functioncall", "functioncalloutput", "tooluse", "toolresult",
				"servertooluse", "toolcall", "toolcalls"),
			"role":         newTrie("system", "developer", "assistant", "tool", "function", "user", "ipython", "model"),
			"stopreason":   newTrie("tooluse"),
			"finishreason": newTrie("toolcalls", "functioncall"),
		},
		lineWords:  newTrie("action", "actioninput", "observation", "finalanswer", "thought", "toolcalls", "functioncall"),
		fenceWords: newTrie("toolcode", "toolcall", "toolcalls", "functioncall", "toolcodeoutput"),
		sysWord:    newTrie("sys"),
	}
})

// class marks the view bytes scan stops at: a shape can start at a
// trigger; a line break makes the next non-space byte a line start.
var class = func() (t [256]uint8) {
	for _, c := range []byte{'[', '<', '"', '\'', '{', ',', '`'} {
		t[c] = clsTrigger
	}
	t['\n'] = clsNewline
	return t
}()

const (
	clsTrigger = 1 << iota
	clsNewline
)

// scan calls emit for every shape in b, left to right, without overlaps.
func scan(b []byte, emit func(s, e int, k kind)) {
	lineStart := true
	for i := 0; i < len(b); {
		if lineStart {
			i = skipWS(b, i)
			if i == len(b) {
				return
			}
			lineStart = false
			if s, e, ok := lineShape(b, i); ok {
				emit(s, e, kindShape)
				i = e
				continue
			}
		}
		// Most bytes are neither: skip them in a tight loop.
		for i < len(b) && class[b[i]] == 0 {
			i++
		}
		if i == len(b) {
			return
		}
		if class[b[i]] == clsNewline {
			lineStart = true
			i++
			continue
		}
		if s, e, k, ok := shapeAt(b, i); ok {
			emit(s, e, k)
			i = e
			continue
		}
		i++
	}
}

// shapeAt matches a shape starting at the trigger b[i].
func shapeAt(b []byte, i int) (s, e int, k kind, ok bool) {
	switch b[i] {
	case '[':
		e, k, ok = bracketShape(b, i)
		return i, e, k, ok
	case '<':
		e, k, ok = angleShape(b, i)
		return i, e, k, ok
	case '"', '\'':
		e, ok = jsonShape(b, i+1, true)
		return i, e, kindShape, ok
	case '{', ',':
		j := skipWS(b, i+1)
		e, ok = jsonShape(b, j, false)
		return j, e, kindShape, ok
	case '`':
		e, ok = fenceShape(b, i)
		return i, e, kindShape, ok
	}
	return 0, 0, 0, false
}

// bracketShape: "[" ["/"] keyword [attributes] "]", e.g. [TOOL_CALLS],
// [/INST], [tool_call name=x], [ / plugin_output ].
func bracketShape(b []byte, i int) (int, kind, bool) {
	j := skipWS(b, i+1)
	closing := at(b, j, '/')
	if closing {
		j = skipWS(b, j+1)
	}
	w, end := keywords().bracketWords.longest(b, j)
	if w == "" {
		return 0, 0, false
	}
	return closeTag(b, end, ']', '['), markerKind(w, closing), true
}

// angleShape: "<|" token "|>" special tokens, "<<SYS>>", and "<" ["/"]
// [namespace ":"] keyword [attributes] ">" tags.
func angleShape(b []byte, i int) (int, kind, bool) {
	j := skipWS(b, i+1)
	switch {
	case at(b, j, '|'):
		return specialToken(b, j+1)
	case at(b, j, '<'):
		k := skipWS(b, j+1)
		if at(b, k, '/') {
			k = skipWS(b, k+1)
		}
		if w, end := keywords().sysWord.longest(b, k); w != "" {
			e := skipWS(b, end)
			for n := 0; n < 2 && at(b, e, '>'); n++ {
				e++
			}
			return e, kindShape, true
		}
		return 0, 0, false
	}
	closing := at(b, j, '/')
	if closing {
		j = skipWS(b, j+1)
	}
	// A namespace prefix (antml:invoke, ns0:function_calls).
	k := j
	for k < len(b) && k-j <= 24 && (sym(b[k]) >= 0 || isSep(b[k])) {
		k++
	}
	if k > j && at(b, k, ':') {
		j = skipWS(b, k+1)
	}
	w, end := keywords().angleWords.longest(b, j)
	switch {
	case w == "":
		return 0, 0, false
	case w == "parameter" && !closing, w == "parametername" && closing:
		return 0, 0, false
	}
	return closeTag(b, end, '>', '<'), markerKind(w, closing), true
}

// specialToken: "<|" then up to maxToken bytes of a token name, then
// "|>" — every family's special tokens (<|im_start|>, <|eot_id|>,
// <|python_tag|>, DeepSeek's <｜tool▁calls▁begin｜> …).
func specialToken(b []byte, j int) (int, kind, bool) {
	letters := 0
	for k := j; k < len(b) && k-j <= maxToken; k++ {
		c := b[k]
		switch {
		case sym(c) >= 0:
			if c >= 'a' && c <= 'z' {
				letters++
			}
		case isWS(c) || isSep(c) || c == ':' || c == '/' || c == '\'' || c == '"' || c == '=':
		case c == '|':
			if letters == 0 {
				return 0, 0, false
			}
			e := skipWS(b, k+1)
			if at(b, e, '>') {
				return e + 1, kindShape, true
			}
			return k + 1, kindShape, true
		default:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// closeTag extends a tag whose keyword ends at end to its closing byte,
// when one follows within maxAttr bytes (no new tag opening on the way);
// otherwise the tag is the keyword alone.
func closeTag(b []byte, end int, closer, opener byte) int {
	for k := end; k < len(b) && k-end <= maxAttr; k++ {
		switch b[k] {
		case closer:
			return k + 1
		case opener:
			return end
		}
	}
	return end
}

func markerKind(w string, closing bool) kind {
	switch {
	case w != "pluginoutput":
		return kindShape
	case closing:
		return kindMarkerClose
	}
	return kindMarkerOpen
}

// jsonShape matches a key at b[j] (quoted when quoted is set, the
// opening quote already consumed): "tool_calls":, "function_call":,
// "function": {, "type": "function", "role": "system",
// "stop_reason": "tool_use" … It returns the end of the shape.
func jsonShape(b []byte, j int, quoted bool) (int, bool) {
	w, end := keywords().jsonKeys.longest(b, skipWS(b, j))
	if w == "" {
		return 0, false
	}
	p := skipWSSep(b, end)
	if quoted {
		if !at(b, p, '"') && !at(b, p, '\'') {
			return 0, false
		}
		p = skipWS(b, p+1)
	}
	if !at(b, p, ':') {
		return 0, false
	}
	p++
	vals, typed := keywords().jsonValues[w]
	switch {
	case w == "function":
		q := skipWS(b, p)
		if !at(b, q, '{') {
			return 0, false
		}
		return q + 1, true
	case !typed:
		return p, true
	}
	q := skipWS(b, p)
	if !at(b, q, '"') && !at(b, q, '\'') {
		return 0, false
	}
	v, vend := vals.longest(b, skipWS(b, q+1))
	if v == "" {
		return 0, false
	}
	r := skipWSSep(b, vend)
	if !at(b, r, '"') && !at(b, r, '\'') {
		return 0, false
	}
	return r + 1, true
}

// fenceShape: a Markdown fence that announces a tool call (```tool_code).
func fenceShape(b []byte, i int) (int, bool) {
	j := i
	for j < len(b) && j-i < 3 && (b[j] == '`' || b[j] == '\'') {
		j++
	}
	w, end := keywords().fenceWords.longest(b, skipWS(b, j))
	if w == "" {
		return 0, false
	}
	return end, true
}

// lineShape matches a ReAct line opener at a line start: any
// indentation, bullets or list numbers, then Action:, Action Input:,
// Observation:, Final Answer:, Thought: (also "**Action:**").
func lineShape(b []byte, i int) (int, int, bool) {
	j := i
bullets:
	for j < len(b) && j-i < 16 {
		switch c := b[j]; {
		case c == ' ' || c == '-' || c == '*' || c == '+' || c == '>' || c == '#' || c == '_':
			j++
		case c >= '0' && c <= '9':
			k := j
			for k < len(b) && k-j < 4 && b[k] >= '0' && b[k] <= '9' {
				k++
			}
			if !at(b, k, '.') && !at(b, k, ')') {
				break bullets
			}
			j = k + 1
		default:
			break bullets
		}
	}
	w, end := keywords().lineWords.longest(b, j)
	if w == "" {
		return 0, 0, false
	}
	p := end
	for p < len(b) && (isWS(b[p]) || b[p] == '*' || b[p] == '_') {
		p++
	}
	if !at(b, p, ':') {
		return 0, 0, false
	}
	return j, p + 1, true
}
