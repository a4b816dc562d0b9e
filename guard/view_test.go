package guard

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func viewOf(s string) string {
	var v view
	v.build(s)
	return string(v.b)
}

// TestViewAgreesWithNFKC: every character whose NFKC form (without
// combining marks) is ASCII reads in the view as that ASCII, lower-cased,
// unless the look-alike table folds it on purpose (‗ reads as _ rather
// than as a space with a mark).
func TestViewAgreesWithNFKC(t *testing.T) {
	bad := 0
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r < 0xE000 || !utf8.ValidRune(r) || confusable(r) != 0 {
			continue
		}
		k := strings.Map(func(r rune) rune {
			if unicode.In(r, unicode.Mn, unicode.Me) || ignorable(r) {
				return -1
			}
			return r
		}, norm.NFKC.String(string(r)))
		if k == "" || !isPrintableASCII(k) {
			continue
		}
		want := strings.Map(func(r rune) rune {
			if r == '\t' {
				return ' '
			}
			return unicode.ToLower(r)
		}, k)
		if got := viewOf(string(r)); got != want {
			bad++
			if bad < 20 {
				t.Errorf("U+%04X %q: view %q, NFKC %q", r, string(r), got, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d characters disagree", bad)
	}
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7F {
			return false
		}
	}
	return true
}

func TestViewSpans(t *testing.T) {
	tests := []struct {
		in, view string
		i, j     int    // a view range
		orig     string // the original text it maps to
	}{
		{"ab", "ab", 0, 1, "a"},
		{"é[x]", "e[x]", 1, 4, "[x]"},
		{"a&lt;b", "a<b", 1, 2, "&lt;"},
		{"&amp;lt;x", "<x", 0, 1, "&amp;lt;"},
		{"[t\u200bo]\u200bz", "[to]z", 0, 4, "[t\u200bo]\u200b"},
		{"ﬁx", "fix", 0, 1, "ﬁ"}, // the ligature goes whole
		{`\ud835\udc2d`, "t", 0, 1, `\ud835\udc2d`},
		{"%3C%7C", "<|", 1, 2, "%7C"},
		{"Ａ\u0301b", "ab", 0, 1, "Ａ\u0301"},
	}
	for _, tt := range tests {
		var v view
		v.build(tt.in)
		if string(v.b) != tt.view {
			t.Errorf("view(%q) = %q, want %q", tt.in, v.b, tt.view)
			continue
		}
		s, e := v.span(tt.i, tt.j)
		if got := tt.in[s:e]; got != tt.orig {
			t.Errorf("view(%q)[%d:%d] maps to %q, want %q", tt.in, tt.i, tt.j, got, tt.orig)
		}
	}
}

// TestViewMapsInOrder: over the corpus, every view byte maps to the
// start of a character of the original, in order, and every span is a
// valid range of it.
func TestViewMapsInOrder(t *testing.T) {
	c := loadCorpus(t)
	var texts []string
	for _, p := range c.Payloads {
		texts = append(texts, p.Text)
	}
	for _, b := range c.Benign {
		texts = append(texts, b.Text)
	}
	for _, text := range texts {
		var v view
		v.build(text)
		prev := 0
		for i := range v.b {
			s := v.startOf(i)
			if s < prev || s >= len(text) || !utf8.RuneStart(text[s]) && !v.ident {
				t.Fatalf("%.40q: view byte %d maps to %d (previous %d)", text, i, s, prev)
			}
			prev = s
			if a, e := v.span(i, i+1); a != s || e <= a || e > len(text) {
				t.Fatalf("%.40q: span(%d) = [%d,%d)", text, i, a, e)
			}
		}
	}
}
