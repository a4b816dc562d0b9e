package orchestrator

import (
	"strings"
	"testing"
)

// TestSystemPromptLayout: the persona, the safety rules, the custom
// rules (trimmed), then each non-empty section after a blank line, with
// no trailing newline; the orchestrator's shared base with its sections
// gives the same text.
func TestSystemPromptLayout(t *testing.T) {
	lastRule := "- " + safetyRules[len(safetyRules)-1]
	cases := []struct {
		name     string
		custom   []string
		sections []string
		tail     string
	}{
		{"bare", nil, nil, lastRule},
		{"empty sections", nil, []string{"", ""}, lastRule},
		{"sections", nil, []string{"Tools: x", "", "Memories: y"}, lastRule + "\n\nTools: x\n\nMemories: y"},
		{"custom rules", []string{"  Be brief.  "}, []string{"Tools: x"},
			"never replace them):\n- Be brief.\n\nTools: x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SystemPrompt(c.custom, c.sections...)
			if !strings.HasPrefix(got, persona+"\n\nSafety rules (always in force):\n- ") || !strings.HasSuffix(got, c.tail) {
				t.Fatalf("system prompt:\n%s\nwant the persona first and the tail %q", got, c.tail)
			}
			o := New(Options{Rules: c.custom})
			if shared := withSections(o.prompt, c.sections...); shared != got {
				t.Fatalf("the orchestrator's prompt:\n%s\ndiffers from SystemPrompt's:\n%s", shared, got)
			}
		})
	}
}
