package config

import (
	"fmt"
	"strings"
)

// Env looks up an environment variable; os.LookupEnv fits.
type Env func(name string) (string, bool)

// MapEnv is an Env over a map, for tests and embedding.
func MapEnv(m map[string]string) Env {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// substitution is the result of expanding one scalar.
type substitution struct {
	value   string
	changed bool     // a ${...} or $$ was present
	missing []string // variables unset and without a default
}

// expand replaces ${NAME} with the variable's value, ${NAME:-default} with
// the value or, when unset or empty, the default, and $$ with a literal $.
// A lone $ not followed by { or $ stays as it is. Unset variables without a
// default are reported in missing and expand to "".
func expand(s string, env Env) (substitution, error) {
	if !strings.Contains(s, "$") {
		return substitution{value: s}, nil
	}
	var r substitution
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			r.changed = true
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return r, fmt.Errorf("unterminated \"${\"; close it with \"}\" or write $$ for a literal $")
			}
			expr := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validVarName(name) {
				hint := ""
				if strings.Contains(name, ":") {
					hint = "; a default is written ${NAME:-default}"
				}
				return r, fmt.Errorf("%q is not a valid variable reference: names are letters, digits and _ and do not start with a digit%s", "${"+expr+"}", hint)
			}
			v, ok := env(name)
			switch {
			case hasDef && (!ok || v == ""):
				v = def
			case !ok:
				r.missing = append(r.missing, name)
			}
			b.WriteString(v)
			r.changed = true
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	r.value = b.String()
	return r, nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
