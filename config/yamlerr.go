package config

import (
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

// explain turns the decoder's message about a value (a type error, or a
// structural one such as a duplicated key, whose line is right) into the
// problem and its fix. Syntax errors are syntaxProblem's.
func explain(msg string) string {
	if m := unmarshalRe().FindStringSubmatch(msg); m != nil {
		return explainType(m[1], m[2], m[3])
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
		if kv, ok := noSpaceAfterColon(value); ok {
			return fmt.Sprintf("%s is one value where a section is expected: a colon needs a space after it: write %q", what, kv)
		}
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
