package console

import (
	"bytes"
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// An answer reaches the terminal as text: what a terminal would act on
// is written as an escape the operator can read, and ordinary text,
// whatever its script, prints as it is.
func TestSendWritesWhatATerminalWouldActOnAsEscapes(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"clear screen", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"OSC 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", `\x1b]52;c;cm0gLXJmIH4=\x07`},
		{"OSC 8 link", "\x1b]8;;http://127.0.0.1/x\x1b\\here\x1b]8;;\x1b\\", `\x1b]8;;http://127.0.0.1/x\x1b\here\x1b]8;;\x1b\`},
		{"C1 CSI", "x\u009b2Jy", `x\u009b2Jy`},
		{"bidi override", "abc\u202eevil\u202c", `abc\u202eevil\u202c`},
		{"bidi isolate", "\u2066x\u2069", `\u2066x\u2069`},
		{"lone carriage return", "safe\rrm -rf", `safe\x0drm -rf`},
		{"backspace and bell", "a\bb\a", `a\x08b\x07`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"CRLF is a line break", "one\r\ntwo", "one\ntwo"},
		{"line separator", "one\u2028two", "one\ntwo"},
		{"markdown and code", "**bold**\n```go\nfunc f() {\n\treturn\n}\n```", "**bold**\n```go\nfunc f() {\n\treturn\n}\n```"},
		{"emoji, CJK, RTL with a mark", "👋🏽 你好 مرحبا\u200f!", "👋🏽 你好 مرحبا\u200f!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ch := New(Options{Out: &out, TerminalOut: true})
			if _, err := ch.Send(context.Background(), core.Outbound{}, tc.in); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want+"\n" {
				t.Fatalf("Send(%q) wrote %q; want %q", tc.in, got, tc.want+"\n")
			}
		})
	}
}

// Through a pipe (a script, a file; stdout not a terminal) an answer is
// written as it is, bytes for bytes: there is no terminal to act on it.
func TestSendThroughAPipeWritesTheAnswerAsItIs(t *testing.T) {
	answer := "a\x1b[1mb\x1b[0m\r\nc\u009b\u202e\u2028d\re\xff"
	var out bytes.Buffer
	ch := New(Options{Out: &out})
	if _, err := ch.Send(context.Background(), core.Outbound{}, answer); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != answer+"\n" {
		t.Fatalf("through a pipe Send(%q) wrote %q; want the answer as it is", answer, got)
	}
}
