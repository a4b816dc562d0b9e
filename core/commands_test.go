package core_test

import (
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		in, name, args string
		ok             bool
	}{
		{"/help", "help", "", true},
		{"/model@talon_bot fast", "model", "fast", true},
		{"  /Model  gpt ", "model", "gpt", true},
		{"/etc/hosts is a file", "", "", false},
		{"hello /help", "", "", false},
		{"/", "", "", false},
		{"/1abc", "", "", false},
	}
	for _, tc := range tests {
		name, args, ok := core.ParseCommand(tc.in)
		if name != tc.name || args != tc.args || ok != tc.ok {
			t.Errorf("ParseCommand(%q) = %q %q %v; want %q %q %v", tc.in, name, args, ok, tc.name, tc.args, tc.ok)
		}
	}
}
