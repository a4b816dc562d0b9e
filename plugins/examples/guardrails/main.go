package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/opentalon/opentalon/plugins/sdk"
)

var (
	emailRE  = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	cardRE   = regexp.MustCompile(`\b(?:\d[ -]?){13,19}\b`)
	adviceRE = regexp.MustCompile(`(?i)\b(diagnos\w*|prescri\w*|dosage|lawsuit|legal advice)\b`)
)

// note is added to answers that read like professional advice.
const note = "\n\n_This is not medical or legal advice._"

type guardrails struct{}

func (guardrails) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{
		Name:        "guardrails",
		Description: "Redacts personal data before the LLM and marks advice in answers.",
		// Order 10: after Lua scripts numbered below 10, before the rest.
		Hooks: []sdk.Hook{{Stage: sdk.StagePre, Order: 10}, {Stage: sdk.StagePost, Order: 90}},
	}
}

func (guardrails) Execute(context.Context, sdk.Call) (string, error) {
	return "", fmt.Errorf("guardrails has no actions")
}

// PreHook redacts, or answers "ping" without the LLM.
func (guardrails) PreHook(_ context.Context, r sdk.HookRequest) (sdk.HookResult, error) {
	if strings.EqualFold(strings.TrimSpace(r.Text), "ping") {
		return sdk.HookResult{Reply: "pong"}, nil
	}
	n := 0
	text := emailRE.ReplaceAllStringFunc(r.Text, func(string) string { n++; return "[email]" })
	text = cardRE.ReplaceAllStringFunc(text, func(string) string { n++; return "[card number]" })
	if n == 0 {
		return sdk.HookResult{}, nil
	}
	return sdk.HookResult{Text: text, Metadata: map[string]string{"redacted": strconv.Itoa(n)}}, nil
}

// PostHook adds the note to advice.
func (guardrails) PostHook(_ context.Context, r sdk.HookRequest) (sdk.HookResult, error) {
	if adviceRE.MatchString(r.Text) && !strings.HasSuffix(r.Text, note) {
		return sdk.HookResult{Text: r.Text + note}, nil
	}
	return sdk.HookResult{}, nil
}

func main() {
	if err := sdk.Serve(guardrails{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
