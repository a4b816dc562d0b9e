package guard

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/opentalon/opentalon/core"
)

// Removed replaces every neutralized shape, so removals cannot splice the
// surrounding text into a new shape.
const Removed = "[removed]"

// Replacements for the wrapper's own markers found inside plugin text.
const (
	escapedOpen  = "(plugin_output)"
	escapedClose = "(/plugin_output)"
)

// maxRounds bounds how often Sanitize re-checks its own output.
const maxRounds = 4

// Sanitizer neutralizes text that the model would read as a tool call, a
// tool result, a role switch or the wrapper's own markers, in any
// spelling (see view.go and shapes.go). It is safe for concurrent use;
// the zero value has the built-in shapes only.
type Sanitizer struct {
	extra []*regexp.Regexp
	views sync.Pool // *view
}

// NewSanitizer builds a sanitizer with the built-in shapes plus extra
// patterns (plugins.tools.sanitize.extra_patterns, Go RE2 syntax). Extra
// patterns are matched on the text as it is and on its normalized view.
func NewSanitizer(extra []string) (*Sanitizer, error) {
	s := &Sanitizer{}
	for i, p := range extra {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, core.Errorf(core.KindInvalid, "plugins.tools.sanitize.extra_patterns[%d] %q is not a valid regular expression (Go RE2 syntax): %w", i, p, err)
		}
		s.extra = append(s.extra, re)
	}
	return s, nil
}

// Sanitize replaces every forbidden shape by Removed and every spelling
// of the wrapper's markers by "(plugin_output)" / "(/plugin_output)". It
// checks its own output again until nothing matches (at most maxRounds
// times), so no splice of the remaining text forms a new shape. Text
// without a shape is returned as it is.
func (s *Sanitizer) Sanitize(text string) string {
	for range maxRounds {
		out, changed := s.once(text, false)
		if !changed {
			return out
		}
		text = out
	}
	return text
}

// Escape neutralizes only the wrapper's markers, in any spelling.
func (s *Sanitizer) Escape(text string) string {
	for range maxRounds {
		out, changed := s.once(text, true)
		if !changed {
			return out
		}
		text = out
	}
	return text
}

// Matches reports whether text holds a forbidden shape or a marker.
func (s *Sanitizer) Matches(text string) bool {
	_, changed := s.once(text, false)
	return changed
}

type span struct {
	s, e int
	k    kind
}

func (s *Sanitizer) once(text string, markersOnly bool) (string, bool) {
	var spans []span
	if !markersOnly {
		for _, re := range s.extra {
			for _, m := range re.FindAllStringIndex(text, -1) {
				if m[1] > m[0] {
					spans = append(spans, span{m[0], m[1], kindShape})
				}
			}
		}
	}
	v, _ := s.views.Get().(*view)
	if v == nil {
		v = new(view)
	}
	defer s.views.Put(v)
	v.build(text)
	add := func(i, j int, k kind) {
		a, b := v.span(i, j)
		spans = append(spans, span{a, b, k})
	}
	if markersOnly {
		scanMarkers(v.b, add)
	} else {
		scan(v.b, add)
		for _, re := range s.extra {
			for _, m := range re.FindAllIndex(v.b, -1) {
				if m[1] > m[0] {
					add(m[0], m[1], kindShape)
				}
			}
		}
	}
	if len(spans) == 0 {
		return text, false
	}
	slices.SortFunc(spans, func(a, b span) int { return a.s - b.s })
	var out strings.Builder
	out.Grow(len(text))
	pos := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		i++
		// Overlapping spans become one shape.
		for i < len(spans) && spans[i].s < cur.e {
			cur.e = max(cur.e, spans[i].e)
			cur.k = kindShape
			i++
		}
		if cur.s < pos {
			cur.s = pos
		}
		out.WriteString(text[pos:cur.s])
		switch cur.k {
		case kindMarkerOpen:
			out.WriteString(escapedOpen)
		case kindMarkerClose:
			out.WriteString(escapedClose)
		default:
			out.WriteString(Removed)
		}
		pos = cur.e
	}
	out.WriteString(text[pos:])
	return out.String(), true
}

// scanMarkers calls emit for every spelling of the wrapper's markers.
func scanMarkers(b []byte, emit func(s, e int, k kind)) {
	for i := 0; i < len(b); i++ {
		var e int
		var k kind
		var ok bool
		switch b[i] {
		case '[':
			e, k, ok = bracketShape(b, i)
		case '<':
			e, k, ok = angleShape(b, i)
		default:
			continue
		}
		if ok && k != kindShape {
			emit(i, e, k)
			i = e - 1
		}
	}
}
