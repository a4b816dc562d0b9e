package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// unmarshalRe reads the decoder's type errors: the YAML tag, the value,
// the Go type.
var unmarshalRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
})

// explain turns the YAML parser's common messages, which say what it
// met rather than what to do, into the problem and its fix; line is the
// line the parser named (0 if none) and data the file. It returns the
// message and the line to report: the parser names the line before a tab
// that breaks the indentation.
func explain(msg string, line int, data []byte) (string, int) {
	if m := unmarshalRe().FindStringSubmatch(msg); m != nil {
		return explainType(m[1], m[2], m[3]), line
	}
	const tab = "this line holds a tab; YAML indents with spaces only: replace the tab with spaces"
	switch {
	case strings.Contains(msg, "found character that cannot start any token"):
		if l := lineOf(data, line); strings.Contains(l, "\t") {
			return tab, line
		}
		return "a value starts with a character YAML reserves (such as @, ` or %): put the value in quotes", line
	case strings.Contains(msg, "found a tab character"):
		for _, n := range []int{line, line + 1} {
			if strings.HasPrefix(strings.TrimLeft(lineOf(data, n), " "), "\t") {
				return tab, n
			}
		}
		return tab, line
	}
	return explainSyntax(msg), line
}

func explainSyntax(msg string) string {
	switch {
	case strings.Contains(msg, "mapping values are not allowed in this context"):
		return "a \"key: value\" where YAML does not expect one: indent this line like the other keys of its section, or quote a value that holds \": \""
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "could not find expected ':'"),
		strings.Contains(msg, "did not find expected '-' indicator"):
		return "the indentation does not line up here: the keys of one section start in the same column, indented with spaces under their section's key"
	case strings.Contains(msg, "found unexpected end of stream"):
		return "the file ends inside a quoted value or an open [ ] or { }: close the quote or the bracket"
	case strings.Contains(msg, "did not find expected node content"), strings.Contains(msg, "did not find expected ',' or"):
		return "a [ ] or { } list is not closed, or an item in it is empty: check its commas and brackets"
	}
	return msg
}

// explainType says what a value of the wrong kind should be.
func explainType(tag, value, into string) string {
	what := "this value"
	if value != "" {
		what = fmt.Sprintf("%q", value)
	}
	switch {
	case tag == "seq" && !strings.HasPrefix(into, "[]"):
		return "a list is given where one value (or a section) is expected: write the value without - or [ ]"
	case tag == "map" && !strings.HasPrefix(into, "map[") && !strings.HasPrefix(into, "config."):
		return "a section (key: value lines) is given where one value is expected: write the value on the key's line"
	case strings.HasPrefix(into, "[]"):
		return fmt.Sprintf("%s is one value where a list is expected: write [%s] or one item per line starting with \"- \"", what, strings.Trim(what, `"`))
	case strings.HasPrefix(into, "map[") || strings.HasPrefix(into, "config."):
		return fmt.Sprintf("%s is one value where a section (key: value lines, indented below this key) is expected", what)
	case strings.HasPrefix(into, "int") || strings.HasPrefix(into, "uint"):
		return fmt.Sprintf("%s is not a whole number: write one such as 4", what)
	case strings.HasPrefix(into, "float"):
		return fmt.Sprintf("%s is not a number: write one such as 0.5", what)
	case into == "bool":
		return fmt.Sprintf("%s is not true or false: write true or false", what)
	case into == "string":
		return "a list or a section is given where one value is expected: write the value on the key's line, in quotes if it holds : or #"
	}
	return fmt.Sprintf("%s is not a %s", what, into)
}

// lineOf returns line n (1-based) of data, "" when there is none.
func lineOf(data []byte, n int) string {
	if n <= 0 {
		return ""
	}
	lines := bytes.Split(data, []byte("\n"))
	if n > len(lines) {
		return ""
	}
	return string(lines[n-1])
}
