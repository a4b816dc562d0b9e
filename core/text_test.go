package core

import "testing"

func TestCleanText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"a\x00b\x00", "ab"},
		{"bad \xff\xfe byte", "bad \uFFFD byte"},
		{"\x00\xc3", "\uFFFD"},
		{"", ""},
	} {
		if got := CleanText(tc.in); got != tc.want {
			t.Errorf("CleanText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
