package config

import (
	"errors"
	"strings"
	"testing"
)

// TestYAMLSyntaxErrorsNameTheirLine: every syntax error names the file
// and the line where the problem is, and says what to change there. The
// first four are an audit's findings on the built binary: a bad indent on
// line 4 was reported on line 1, an unclosed { on line 3 on line 2, an
// unquoted ${TG} in a { } on line 8 on line 7 as an unclosed list, and
// the same on line 1 with no line at all (yaml.v3 names the line of the
// construct it was reading, counted from 0 by its parser).
func TestYAMLSyntaxErrorsNameTheirLine(t *testing.T) {
	const seven = "state:\n  data_dir: /tmp/x\nqueue:\n  workers: 2\nrouting:\n  primary: fake/small\nchannels:\n"
	tests := []struct {
		name, body string
		line       int
		fix        string // the hint holds it
	}{
		{"a bad indent (audit)", "models:\n  providers:\n    fake: { api: openai-completions }\n   catalog:\n    fake/big: { alias: big }\n",
			4, "this line is indented by 3 spaces and line 3 by 4"},
		{"an unclosed { (audit)", "state:\n  data_dir: /tmp/x\nqueue: { workers: 4\nrouting:\n  primary: fake/small\n",
			3, "is not closed"},
		{"an unquoted ${} in { } (audit)", seven + "  telegram: { enabled: true, token: ${TG} }\n",
			8, `write token: "${TG}"`},
		{"an unquoted ${} in { } on line 1 (audit)", "state: { data_dir: ${D} }\n",
			1, `write data_dir: "${D}"`},
		{"an unquoted ${} in [ ]", "routing:\n  fallbacks: [ fake/big, ${FALLBACK} ]\n",
			2, `write "${FALLBACK}"`},
		{"an unquoted ${} on the second line of a { }", "models:\n  providers:\n    fake: { api: openai-completions,\n            api_key: ${KEY} }\n",
			4, `write api_key: "${KEY}"`},
		{"a { not closed before the next key", "queue: { workers: 4,\n  max_attempts: 3\nrouting:\n  primary: fake/small\n",
			1, "a [ or { on this line is not closed (YAML was still inside it on line 2)"},
		{"a [ not closed at the end of the file", "routing:\n  primary: fake/small\n  fallbacks: [fake/big\n",
			3, "is not closed"},
		{"a ] that closes nothing", "routing:\n  fallbacks: [fake/big]]\n",
			2, "closes nothing: remove it"},
		{`": " in a { } value`, "models:\n  providers:\n    fake: { api: openai-completions, base_url: http://127.0.0.1: 9 }\n",
			3, `put the value in quotes (base_url: "http://127.0.0.1: 9")`},
		{`": " in a value`, "server:\n  listen: 127.0.0.1\n  api_key: a: b\n",
			3, `write api_key: "a: b"`},
		{"a tab on line 1", "\tqueue:\n  workers: 4\n", 1, "replace the tab with spaces"},
		{"a tab after a key", "state:\n  data_dir: /tmp/x\nqueue:\n  workers: 4\n\tmax_attempts: 3\n", 5, "replace the tab with spaces"},
		{"an unclosed quote", "server:\n  listen: \"127.0.0.1:0\n  api_key: x\nqueue:\n  workers: 4\n",
			2, "is not closed: end it with the quote it starts with"},
		{"an unclosed quote on line 1", "state: { data_dir: '/tmp/x }\nqueue:\n  workers: 4\n", 1, "is not closed"},
		{"no space after the colon, then a key", "queue:\n  workers:4\n  max_attempts: 3\n",
			2, `a colon needs a space after it: write "workers: 4"`},
		{"no space after the colon of the last key", "queue:\n  max_attempts: 3\n  workers:4\nrouting:\n  primary: fake/small\n",
			3, `a colon needs a space after it: write "workers: 4"`},
		{"no space after the colon of the only key", "state:\n  data_dir: /tmp/x\nqueue:\n  workers:4\n",
			4, `a colon needs a space after it: write "workers: 4"`},
		{"a key indented less", "state:\n  data_dir: /tmp/x\nqueue:\n  workers: 4\n max_attempts: 3\n",
			5, "this line is indented by 1 space and line 4 by 2"},
		{"a key indented more", "state:\n  data_dir: /tmp/x\nqueue:\n  workers: 4\n    max_attempts: 3\n",
			5, "indent it like the other keys of its section"},
		{"a key without a colon", "queue:\n  workers: 4\n  max_attempts\n", 3, `"max_attempts" is not "key: value"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tt.body), noEnv())
			var es *Errors
			if !errors.As(err, &es) || len(es.Problems) == 0 {
				t.Fatalf("error = %v, want the problem", err)
			}
			p := es.Problems[0] // problems with a line come first
			if p.Line != tt.line || !strings.HasSuffix(p.File, "config.yaml") {
				t.Errorf("problem at %s:%d, want config.yaml:%d:\n%s", p.File, p.Line, tt.line, p)
			}
			if !strings.Contains(p.Msg, tt.fix) {
				t.Errorf("hint %q does not say %q", p.Msg, tt.fix)
			}
			if strings.Contains(p.Msg, "did not find expected") || strings.Contains(p.Msg, "not allowed in this context") {
				t.Errorf("hint keeps the parser's words: %q", p.Msg)
			}
		})
	}
}
