package orchestrator

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
)

// fakeLLM answers with a fixed text and records the calls.
type fakeLLM struct {
	text   string
	stop   string // the answer's StopReason
	window int
	calls  []routing.Call
}

func (f *fakeLLM) Chat(_ context.Context, c routing.Call) (routing.Result, error) {
	f.calls = append(f.calls, c)
	return routing.Result{Response: &provider.Response{Text: f.text, StopReason: f.stop, Usage: core.Usage{InputTokens: 3, OutputTokens: 1}}, Model: "fake/m", TaskType: "chat", Reason: "primary"}, nil
}
func (f *fakeLLM) ContextWindow(string) int { return f.window }

type history []core.ChatMessage

func (h history) History(context.Context, int64, int) ([]core.ChatMessage, error) { return h, nil }

func TestAnswerAppendsTurn(t *testing.T) {
	llm := &fakeLLM{text: "Paris"}
	prev := history{{Role: core.RoleUser, Content: "hi"}, {Role: core.RoleAssistant, Content: "hello"}}
	o := New(Options{LLM: llm, History: prev, Rules: []string{"Answer in French when asked in French."}})
	ans, err := o.Answer(context.Background(), core.Turn{Text: "capital of France?", In: core.Inbound{UserID: "u1"}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Paris" || ans.Model != "fake/m" || len(ans.Messages) != 2 || ans.Messages[0].Content != "capital of France?" || ans.Messages[1].Role != core.RoleAssistant {
		t.Fatalf("answer = %+v", ans)
	}
	c := llm.calls[0]
	if len(c.Req.Messages) != 3 || c.UserID != "u1" || c.Purpose != "chat" {
		t.Fatalf("call = %+v", c)
	}
	sys := c.Req.System
	if !strings.Contains(sys, "[plugin_output]") || strings.Index(sys, "Answer in French") < strings.Index(sys, "[plugin_output]") {
		t.Fatalf("system prompt must hold the safety rules, then the custom rule:\n%s", sys)
	}
}

func TestRetryReanswersLastQuestion(t *testing.T) {
	llm := &fakeLLM{text: "better"}
	prev := history{{Role: core.RoleUser, Content: "q"}, {Role: core.RoleAssistant, Content: "bad"}}
	o := New(Options{LLM: llm, History: prev})
	ans, err := o.Answer(context.Background(), core.Turn{Retry: true, Exclude: []string{"fake/m"}})
	if err != nil {
		t.Fatal(err)
	}
	c := llm.calls[0]
	if len(c.Req.Messages) != 1 || c.Req.Messages[0].Content != "q" || len(c.Exclude) != 1 {
		t.Fatalf("retry call = %+v; want only the question and the exclusion", c)
	}
	if len(ans.Messages) != 1 || ans.Messages[0].Content != "better" {
		t.Fatalf("retry answer messages = %+v; want only the new answer", ans.Messages)
	}
}

// An answer that shows nothing, white space or an empty code block
// (which the channels used to send as "(empty answer)"), is an empty
// answer: the user gets the apology either way.
func TestEmptyAnswerIsMalformed(t *testing.T) {
	tests := []struct {
		text  string
		empty bool
	}{
		{"  ", true},
		{"```\n```", true},
		{"\n```go\n\n  \n```\n", true},
		{"~~~\n~~~", true},
		{"```\nx\n```", false},
		{"see ```", false},
		{"```ls -la```", false},
		{"ok\n```\n```", false},
	}
	for _, tt := range tests {
		o := New(Options{LLM: &fakeLLM{text: tt.text}, History: history{}})
		_, err := o.Answer(context.Background(), core.Turn{Text: "x"})
		if tt.empty && (core.ErrorKind(err) != core.KindMalformed || !errors.Is(err, core.ErrEmptyAnswer)) {
			t.Errorf("answer %q: err = %v; want malformed, an empty answer (core.ErrEmptyAnswer)", tt.text, err)
		}
		if !tt.empty && err != nil {
			t.Errorf("answer %q: err = %v; want the answer", tt.text, err)
		}
	}
}

// An answer the provider stopped before its end (finish reason
// "length", "content_filter", Anthropic's "refusal") is not an unreadable
// one: the user reads the text so far with a note saying why it ends
// there, or, when there is no text, why there is none; the stored
// history keeps only the model's words.
func TestStoppedAnswer(t *testing.T) {
	tests := []struct {
		text, stop string
		want       string // the text shown, or the error's user message
	}{
		{"Once upon", "length", "Once upon\n\n" + lengthNote},
		{"Partly", "content_filter", "Partly\n\n" + filterNote},
		{"Partly", "refusal", "Partly\n\n" + filterNote},
		{"", "length", "Sorry, I could not answer that: the answer did not fit the length limit for one answer. Ask for a shorter answer, or tell the operator."},
		{"", "content_filter", "Sorry, I could not answer that: the AI provider's safety filter withheld the answer. Try rephrasing your request; if it happens again, /new starts a fresh conversation."},
		{"", "refusal", "Sorry, I could not answer that: the AI provider's safety filter withheld the answer. Try rephrasing your request; if it happens again, /new starts a fresh conversation."},
		{"Whole", "stop", "Whole"},
	}
	for _, tt := range tests {
		o := New(Options{LLM: &fakeLLM{text: tt.text, stop: tt.stop}, History: history{}})
		ans, err := o.Answer(context.Background(), core.Turn{Text: "x"})
		got := ans.Text
		if err != nil {
			got = core.UserMessage(err)
			if strings.Contains(err.Error(), "max_output_tokens") != (tt.stop == "length") {
				t.Errorf("%q/%s: log error %q; want the config key models.catalog.<ref>.max_output_tokens for a cut answer only", tt.text, tt.stop, err)
			}
		} else if last := ans.Messages[len(ans.Messages)-1].Content; last != tt.text {
			t.Errorf("%q/%s: stored answer %q; want the model's words only", tt.text, tt.stop, last)
		}
		if got != tt.want {
			t.Errorf("%q/%s: user reads %q; want %q", tt.text, tt.stop, got, tt.want)
		}
	}
}

func TestTrim(t *testing.T) {
	long := strings.Repeat("a", 4000) // ~1000 tokens
	h := []core.ChatMessage{
		{Role: core.RoleUser, Content: long},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "1", Plugin: "p", Action: "a"}}},
		{Role: core.RoleTool, ToolCallID: "1", Content: long},
		{Role: core.RoleAssistant, Content: "done"},
		{Role: core.RoleUser, Content: "next"},
	}
	tests := []struct {
		name   string
		budget int
		first  string
		n      int
	}{
		{"everything fits", 10_000, long, 5},
		{"drops oldest, never starts on a tool result", 1500, "next", 1},
		{"newest always kept", 1, "next", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Trim(h, tc.budget, 0)
			if len(got) != tc.n || got[0].Content != tc.first || got[0].Role != core.RoleUser {
				t.Fatalf("Trim kept %d messages starting %q (%s)", len(got), got[0].Content[:min(10, len(got[0].Content))], got[0].Role)
			}
		})
	}
}
