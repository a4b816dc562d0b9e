package core

import (
	"slices"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"},
		{"https://user:hunter2-long@llm.example/v1", "https://user:***@llm.example/v1"},
		{"https://user@llm.example/v1", "https://user@llm.example/v1"},
		{"https://llm.example/v1beta?key=AIzaSecretValue", "https://llm.example/v1beta?key=***"},
		{"https://llm.example/v1?alt=sse&key=AIzaSecretValue", "https://llm.example/v1?alt=***&key=***"},
		{"http://u:pw@h:notaport/v1", "[a URL that does not parse, redacted: it may hold a credential]"},
		{"", ""},
		// Nothing to hide: the text as written (a config problem quotes
		// what the operator wrote).
		{"${OPENAI_BASE_URL}/v1", "${OPENAI_BASE_URL}/v1"},
		{"HTTP://LLM.example/v1", "HTTP://LLM.example/v1"},
		{"http://h/a path/v1", "http://h/a path/v1"},
	} {
		if got := RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestURLSecrets(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"http://127.0.0.1:11434/v1?alt=sse", nil},
		{"https://user:pass%20word%20long@h/v1", []string{"pass word long", "pass+word+long", "pass%20word%20long", "dXNlcjpwYXNzIHdvcmQgbG9uZw=="}},
		{"https://user:short@h/v1", nil},
		{"https://h/v1?key=AIzaSecretValue&n=1", []string{"AIzaSecretValue"}},
		{"http://u:pw@h:notaport/v1", nil},
	} {
		if got := URLSecrets(c.in); !slices.Equal(got, c.want) {
			t.Errorf("URLSecrets(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
