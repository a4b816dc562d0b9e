package config

import (
	"strings"
	"testing"
)

// The YAML mistakes a newcomer makes come back as file:line, the key and
// what to write instead, not as the parser's words.
func TestYAMLMistakesNameTheFix(t *testing.T) {
	tests := []struct {
		name, body string
		want       string
	}{
		{"a word for a number", "queue:\n  workers: four\n", `config.yaml:2: queue.workers: "four" is not a whole number: write one such as 4`},
		{"a tab", "queue:\n\tworkers: 4\n", "config.yaml:2: this line holds a tab; YAML indents with spaces only: replace the tab with spaces"},
		{"a tab after a key", "queue:\n  workers: 4\n\tmax_attempts: 3\n", "config.yaml:3: this line holds a tab; YAML indents with spaces only"},
		{"a misindented key", "queue:\n  workers: 4\n   max_attempts: 3\n", "config.yaml:3: this line is indented more than the line above, whose key already has its value: indent it like the other keys of its section"},
		{"a key indented less", "queue:\n  workers: 4\n max_attempts: 2\n", "config.yaml:3: the indentation does not line up: this line is indented by 1 space and line "},
		{"an unclosed quote", "server:\n  listen: \"127.0.0.1\n", "config.yaml:2: a quoted value that starts on this line is not closed"},
		{"a list for a number", "queue:\n  workers: [4]\n", "config.yaml:2: queue.workers: a list is given where one value (or a section) is expected"},
		{"one value for a list", "channels:\n  telegram:\n    allow_users: 1234\n", `config.yaml:3: channels.telegram.allow_users: "1234" is one value where a list is expected: write [1234] or one item per line starting with "- "`},
		{"a value for a section", "queue: 4\n", `config.yaml:1: queue: "4" is one value where a section (key: value lines, indented below this key) is expected`},
		{"not a boolean", "channels:\n  telegram: { enabled: yes please }\n", `config.yaml:2: channels.telegram.enabled: "yes please" is not true or false: write true or false`},
		{"not a number", "auth:\n  cooldowns: { multiplier: low }\n", `config.yaml:2: auth.cooldowns.multiplier: "low" is not a number: write one such as 0.5`},
		{"a reserved character", "server:\n  api_key: @secret\n", "config.yaml:2: a value starts with a character YAML reserves (such as @, ` or %): put the value in quotes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, minimal+tt.body), noEnv())
			if err == nil {
				t.Fatal("accepted")
			}
			// The body follows minimal's lines.
			want := tt.want
			if i := strings.Index(want, "config.yaml:"); i >= 0 {
				var n int
				rest := want[i+len("config.yaml:"):]
				j := strings.IndexByte(rest, ':')
				for _, c := range rest[:j] {
					n = n*10 + int(c-'0')
				}
				want = strings.Replace(want, "config.yaml:"+rest[:j], "config.yaml:"+itoa(n+strings.Count(minimal, "\n")), 1)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
			}
			if strings.Contains(err.Error(), "unmarshal") || strings.Contains(err.Error(), "!!") {
				t.Errorf("error keeps the parser's words:\n%v", err)
			}
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
