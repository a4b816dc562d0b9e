package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// A syntax error from gopkg.in/yaml.v3 names one line, often not the one
// where the problem is: the library prefers the line of the construct it
// was reading (the block mapping or the { } being parsed) to the line of
// the token it could not take, and its parser, unlike its scanner,
// counts lines from 0, so a construct on the first line leaves the error
// with no line at all. syntaxProblem therefore finds the lines itself:
//
//   - the construct's line by parsing the file again after one blank line
//     (which changes no meaning): then the library's line is never 0 and
//     is exactly the construct's, counted from 1 for a parser message and
//     one past it for a scanner message;
//   - the problem's line as the shortest run of the file's first lines,
//     from the construct's line on, that fails with the same message: the
//     parser fails on the line that holds the token it cannot take, and
//     on every longer run.
//
// Env substitution (${VAR}) happens after parsing, on the values the
// parser read, so a value holding ${ is written as YAML must read it.

// parserProblems are the messages of yaml.v3's parser (parserc.go), whose
// lines count from 0; every other syntax message is its scanner's.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// parseError parses data as decode does and returns the error's text,
// "" when data parses.
func parseError(data []byte) string {
	var n yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&n)
	if err == nil || errors.Is(err, io.EOF) {
		return ""
	}
	return err.Error()
}

// syntaxProblem returns the line of a YAML syntax error in data, whose
// decoder error is text, and what to change there.
func syntaxProblem(text string, data []byte) (int, string) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	msg := yamlMsg(text)
	construct := 0
	if shifted := parseError(append([]byte("\n"), data...)); shifted != "" && yamlMsg(shifted) == msg {
		construct = yamlLine(shifted)
		if !parserProblems[msg] {
			construct--
		}
	}
	raw := strings.SplitAfter(string(data), "\n")
	at := problemLine(data, raw, msg, construct)
	if at == 0 {
		at = max(construct, yamlLine(text))
	}
	lines := make([]string, len(raw))
	for i, l := range raw {
		lines[i] = strings.TrimRight(l, "\r\n")
	}
	if strings.TrimSpace(lineAt(lines, at)) == "" {
		at = max(prevContent(lines, at), 1) // the end of the file
	}
	return explainSyntax(msg, lines, at, construct)
}

// problemLine is the first line n from from on such that the file's first
// n lines fail with msg; 0 when none does. Once the first n lines hold the
// problem, every longer run fails with it too, so a binary search finds n
// with a few parses (a linear one parsed a long file thousands of times).
func problemLine(data []byte, lines []string, msg string, from int) int {
	ends := make([]int, len(lines)+1) // ends[n]: the length of the first n lines
	for i, l := range lines {
		ends[i+1] = ends[i] + len(l)
	}
	fails := func(n int) bool { return yamlMsg(parseError(data[:ends[n]])) == msg }
	lo, hi := max(from, 1), len(lines)
	if hi < lo || !fails(hi) {
		return 0
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

const (
	tabHint      = "this line holds a tab; YAML indents with spaces only: replace the tab with spaces"
	reservedHint = "a value starts with a character YAML reserves (such as @, ` or %): put the value in quotes"
)

// explainSyntax says what to change for the parser's message msg about
// line at, whose construct (the section or [ ] { } being read, 0 if not
// known) starts on line construct. It returns the line to report.
func explainSyntax(msg string, lines []string, at, construct int) (int, string) {
	line := lineAt(lines, at)
	switch msg {
	case "found character that cannot start any token":
		if strings.Contains(line, "\t") {
			return at, tabHint
		}
		return at, reservedHint
	case "found a tab character that violates indentation", "found a tab character where an indentation space is expected":
		return at, tabHint
	case "found unexpected end of stream":
		if construct > 0 {
			at = construct // the line of the opening quote
		}
		return at, "a quoted value that starts on this line is not closed: end it with the quote it starts with (\" or ')"
	case "block sequence entries are not allowed in this context":
		return at, `a list item ("- ") must start a line of its own, indented under its key`
	case "did not find expected ',' or '}'", "did not find expected ',' or ']'", "did not find expected node content":
		return explainFlow(msg, lines, at, construct)
	case "mapping values are not allowed in this context":
		return explainMappingValue(lines, at)
	case "did not find expected key", "did not find expected '-' indicator", "could not find expected ':'":
		return explainIndent(lines, at)
	}
	if strings.HasPrefix(msg, "unknown anchor ") {
		return at, "a value starts with *, which YAML reads as a reference to an anchor (&name): put the value in quotes"
	}
	return at, msg
}

// varRe finds a key whose value holds ${...} in a [ ] or { }: the key
// (empty in a list) and the value up to the next , ] or }.
var varRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:([^\s{},\[\]"']+)\s*:\s+)?([^\s{},\[\]"':]*\$\{[^}\s]*\}[^,\]}]*)`)
})

// explainFlow explains a [ ] or { } that the parser could not read: an
// unquoted ${VAR} or ": " in it, an empty item, a bracket that closes
// nothing, or one not closed.
func explainFlow(msg string, lines []string, at, construct int) (int, string) {
	from := construct
	if from <= 0 || from > at {
		from = at
	}
	for n := from; n <= at; n++ {
		l := unquoted(lineAt(lines, n))
		if !strings.Contains(l, "${") {
			continue
		}
		if m := varRe().FindStringSubmatch(lineAt(lines, n)); m != nil {
			value := strings.TrimSpace(m[2])
			write := fmt.Sprintf("%q", value)
			if m[1] != "" {
				write = m[1] + ": " + write
			}
			return n, fmt.Sprintf("%s inside { } or [ ] must be in quotes, or YAML reads the { of ${ as the start of a nested section; the variable is still substituted inside quotes: write %s", value, write)
		}
	}
	for n := from; n <= at; n++ {
		if key, value, ok := colonInFlow(lineAt(lines, n)); ok {
			return n, fmt.Sprintf("the value of %s holds \": \", which YAML reads as another key inside { }: put the value in quotes (%s: %q), or, if these are two items, separate them with a comma", key, key, value)
		}
	}
	opened, closed := brackets(lineAt(lines, at))
	switch {
	case closed > opened:
		return at, "a ] or } on this line closes nothing: remove it, or open it with [ or { where the list or section begins"
	case msg == "did not find expected node content" && unclosedFrom(lines, 1, at) == 0:
		if u := strings.ReplaceAll(unquotedComment(lineAt(lines, at)), " ", ""); strings.Contains(u, ",,") || strings.Contains(u, "[,") || strings.Contains(u, "{,") {
			return at, "an item of a [ ] or { } on this line is empty: remove the extra comma"
		}
		return at, "a value is missing here: an item of a [ ] or { } is empty, or a value starts with a character YAML reserves (put such a value in quotes)"
	}
	// For a missing , ] or } the construct is the [ or { itself.
	open := construct
	if msg == "did not find expected node content" || open <= 0 || open > at {
		open = at
		if n := unclosedFrom(lines, 1, at); n > 0 {
			open = n
		}
	}
	if open < at {
		return open, fmt.Sprintf("a [ or { on this line is not closed (YAML was still inside it on line %d): close it with ] or } on this line, or write the section as indented key: value lines", at)
	}
	return open, "a [ ] or { } on this line is not closed, or two of its items have no comma between them: write { key: value, key: value } or [ a, b ]"
}

// unclosedFrom is the first line from from to at whose [ or { is still
// open at line at (0 when none is).
func unclosedFrom(lines []string, from, at int) int {
	depth, first := 0, 0
	for n := from; n <= at; n++ {
		o, c := brackets(lineAt(lines, n))
		if depth == 0 && o > c {
			first = n
		}
		depth += o - c
		if depth <= 0 {
			depth, first = 0, 0
		}
	}
	return first
}

// explainMappingValue explains a ": " where the parser takes none: a
// value holding ": ", a key with no space after its colon or no colon
// on the line above (which makes this line part of that value), or a
// line indented under a key that has its value.
func explainMappingValue(lines []string, at int) (int, string) {
	if prev := prevContent(lines, at); prev > 0 {
		p := lineAt(lines, prev)
		if kv, ok := noSpaceAfterColon(p); ok {
			return prev, fmt.Sprintf("a colon needs a space after it: write %q (without it YAML reads %q as a value, and the next line's \": \" cannot follow)", kv, strings.TrimSpace(p))
		}
		if indent(p) == indent(lineAt(lines, at)) && bareWord(p) {
			return prev, fmt.Sprintf("%q is a key with no colon after it: write \"%s: value\"", strings.TrimSpace(p), strings.TrimSpace(p))
		}
	}
	line := lineAt(lines, at)
	if key, value, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), ": "); ok && strings.Contains(unquoted(value), ": ") {
		return at, fmt.Sprintf("the value of %s holds \": \": put the value in quotes: write %s: %q", key, key, strings.TrimSpace(value))
	}
	if prev := prevContent(lines, at); prev > 0 && indent(line) > indent(lineAt(lines, prev)) {
		return at, "this line is indented more than the line above, whose key already has its value: indent it like the other keys of its section, or move the value above to a line of its own"
	}
	return at, `a "key: value" where YAML does not expect one: indent this line like the other keys of its section, or quote a value that holds ": "`
}

// explainIndent explains a line the parser did not take as the next key
// or item of the section above.
func explainIndent(lines []string, at int) (int, string) {
	line := lineAt(lines, at)
	if kv, ok := noSpaceAfterColon(line); ok {
		return at, fmt.Sprintf("a colon needs a space after it: write %q", kv)
	}
	if o, c := brackets(line); c > o {
		return at, "a ] or } on this line closes nothing: remove it"
	}
	if t := strings.TrimSpace(line); (strings.HasPrefix(t, `"`) || strings.Contains(t, `: "`) || strings.Contains(t, `: '`)) && !strings.HasSuffix(strings.TrimSpace(unquotedComment(t)), `"`) && !strings.HasSuffix(strings.TrimSpace(unquotedComment(t)), `'`) {
		return at, "text follows a quoted value on this line: put the whole value in the quotes"
	}
	if bareWord(line) {
		return at, fmt.Sprintf("%q is not \"key: value\" nor a list item: add the colon and a value, or indent it under its key if it continues the value above", strings.TrimSpace(line))
	}
	msg := "the indentation does not line up here: the keys of one section start in the same column, indented with spaces under their section's key"
	if prev := prevContent(lines, at); prev > 0 && indent(lineAt(lines, prev)) != indent(line) {
		msg = fmt.Sprintf("the indentation does not line up: this line is indented by %s and line %d by %d; the keys of one section start in the same column, indented with spaces under their section's key", spaces(indent(line)), prev, indent(lineAt(lines, prev)))
	}
	return at, msg
}

// lineAt returns line n (1-based) of lines, "" when there is none.
func lineAt(lines []string, n int) string {
	if n <= 0 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// prevContent is the last line before n that is neither blank nor a
// comment (0 when none is).
func prevContent(lines []string, n int) int {
	for p := n - 1; p >= 1; p-- {
		if t := strings.TrimSpace(lineAt(lines, p)); t != "" && !strings.HasPrefix(t, "#") {
			return p
		}
	}
	return 0
}

func indent(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return fmt.Sprintf("%d spaces", n)
}

// noSpaceRe is a key followed by a colon and, with no space between, a
// value that is not a URL's "//": "workers:4".
var noSpaceRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*(?:- )?([A-Za-z_][\w.-]*):([^\s/:].*)$`)
})

// noSpaceAfterColon reports a "key:value" line and its fix "key: value".
func noSpaceAfterColon(line string) (string, bool) {
	u := unquotedComment(line)
	if !noSpaceRe().MatchString(u) {
		return "", false
	}
	m := noSpaceRe().FindStringSubmatch(line[:len(u)])
	return m[1] + ": " + strings.TrimSpace(m[2]), true
}

// bareWord reports a line holding one plain word, no colon, no dash.
func bareWord(line string) bool {
	t := strings.TrimSpace(unquotedComment(line))
	return t != "" && !strings.ContainsAny(t, ":-\"'[]{}#&*!|>%@` \t")
}

// colonInFlow finds an item of a { } on the line whose value holds ": ".
func colonInFlow(line string) (key, value string, ok bool) {
	u := unquoted(line)
	i := strings.IndexAny(u, "{")
	if i < 0 {
		return "", "", false
	}
	// Items end at , { } [ ]; positions in u and line agree.
	start := i + 1
	for j := start; j <= len(u); j++ {
		if j < len(u) && !strings.ContainsRune(",{}[]", rune(u[j])) {
			continue
		}
		item := line[start:j]
		if k, v, found := strings.Cut(item, ": "); found && strings.Contains(unquoted(v), ": ") {
			return strings.TrimSpace(k), strings.TrimSpace(v), true
		}
		start = j + 1
	}
	return "", "", false
}

// brackets counts the [ { and ] } of a line outside quotes and comments.
func brackets(line string) (opened, closed int) {
	for _, c := range unquotedComment(line) {
		switch c {
		case '[', '{':
			opened++
		case ']', '}':
			closed++
		}
	}
	return opened, closed
}

// unquoted returns line with the text inside quotes replaced by spaces
// (same length, so positions agree).
func unquoted(line string) string {
	b := []byte(line)
	var q byte
	for i := 0; i < len(b); i++ {
		switch {
		case q == 0 && (b[i] == '"' || b[i] == '\'') && (i == 0 || strings.IndexByte(" \t:,[{", b[i-1]) >= 0):
			q = b[i]
		case q != 0 && b[i] == q:
			q = 0
		case q != 0:
			b[i] = ' '
		}
	}
	return string(b)
}

// unquotedComment is unquoted without a trailing "# comment".
func unquotedComment(line string) string {
	u := unquoted(line)
	for i := 0; i < len(u); i++ {
		if u[i] == '#' && (i == 0 || u[i-1] == ' ' || u[i-1] == '\t') {
			return u[:i]
		}
	}
	return u
}
