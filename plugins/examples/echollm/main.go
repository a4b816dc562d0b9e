package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/opentalon/opentalon/plugins/sdk"
)

type echollm struct{}

func (echollm) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{Name: "echollm", Description: "An LLM that answers by rule (an example provider)."}
}

func (echollm) Execute(context.Context, sdk.Call) (string, error) {
	return "", fmt.Errorf("echollm has no actions")
}

// Complete answers the conversation: the result of a tool it called, a
// tool call when the user asks "use <plugin>.<action> <argument>", else
// the user's words back.
func (echollm) Complete(_ context.Context, r sdk.CompletionRequest) (sdk.CompletionResponse, error) {
	if len(r.Messages) == 0 {
		return sdk.CompletionResponse{}, &sdk.ProviderError{Kind: sdk.KindBadRequest, Message: "no messages"}
	}
	last := r.Messages[len(r.Messages)-1]
	in := 0
	for _, m := range r.Messages {
		in += len(strings.Fields(m.Content))
	}
	resp := sdk.CompletionResponse{Model: r.Model, InputTokens: in, StopReason: "stop"}
	switch {
	case last.Role == "tool":
		resp.Text = "The tool answered: " + last.Content
	case strings.Contains(last.Content, "rate limit me"):
		return sdk.CompletionResponse{}, &sdk.ProviderError{Kind: sdk.KindRateLimited, Message: "slow down", RetryAfter: 30 * time.Second}
	case strings.HasPrefix(last.Content, "use "):
		name, arg, _ := strings.Cut(strings.TrimPrefix(last.Content, "use "), " ")
		plugin, action, _ := strings.Cut(name, ".")
		for _, t := range r.Tools {
			if t.Plugin == plugin && t.Action == action && len(t.Params) > 0 {
				resp.ToolCalls = []sdk.ToolCall{{ID: "call_1", Plugin: plugin, Action: action, Args: map[string]string{t.Params[0].Name: arg}}}
				resp.StopReason = "tool_calls"
				return resp, nil
			}
		}
		resp.Text = "I have no tool " + name + "."
	default:
		resp.Text = "You said: " + last.Content
	}
	resp.OutputTokens = len(strings.Fields(resp.Text))
	return resp, nil
}

// Stream sends the answer word by word.
func (e echollm) Stream(ctx context.Context, r sdk.CompletionRequest, send func(string) error) (sdk.CompletionResponse, error) {
	resp, err := e.Complete(ctx, r)
	if err != nil {
		return resp, err
	}
	for _, w := range strings.SplitAfter(resp.Text, " ") {
		if err := send(w); err != nil {
			return resp, err
		}
	}
	return resp, nil
}

func main() {
	if err := sdk.Serve(echollm{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
