package main

import (
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestMaxOutputTokensReachesTheWire: models.catalog.<ref>.max_output_tokens
// is the max_tokens of every request to that model; a model without one
// gets the default, at most half its context window.
func TestMaxOutputTokensReachesTheWire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entry string
		want  int
	}{
		{"{ alias: small, weight: 80, context_window: 8000, max_output_tokens: 1234 }", 1234},
		{"{ alias: small, weight: 80, context_window: 8000 }", 4000},
		{"{ alias: small, weight: 80 }", 4096},
	} {
		llm := providertest.NewOpenAI(t)
		yaml := strings.Replace(testConfig(t.TempDir(), llm.BaseURL(), ""),
			"fake/small: { alias: small, weight: 80, context_window: 8000 }", "fake/small: "+tc.entry, 1)
		h := startApp(t, parseConfig(t, yaml))
		h.send("hello")
		h.expect("echo: hello")
		h.shutdown()
		if r, ok := llm.Last(); !ok || r.MaxTokens != tc.want {
			t.Errorf("%s: max_tokens sent = %d, want %d", tc.entry, r.MaxTokens, tc.want)
		}
	}
}
