package main

import (
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
)

func TestEchoLLM(t *testing.T) {
	c := plugintest.Start(t, plugintest.Build(t, "."), plugintest.Options{})
	msg := func(role core.Role, s string) core.ChatMessage { return core.ChatMessage{Role: role, Content: s} }
	req := plugins.ProviderRequest{Model: "echo-1", Messages: []core.ChatMessage{msg(core.RoleUser, "hello there")}}
	r, err := c.Complete(req)
	if err != nil || r.Text != "You said: hello there" || r.Model != "echo-1" || r.Usage.InputTokens != 2 || r.Usage.OutputTokens != 4 {
		t.Fatalf("complete = %+v %v", r, err)
	}
	var deltas []string
	if r, err := c.Stream(req, func(d string) { deltas = append(deltas, d) }); err != nil || strings.Join(deltas, "") != r.Text || len(deltas) != 4 {
		t.Fatalf("stream = %+v %v %q", r, err, deltas)
	}
	req.Messages = []core.ChatMessage{msg(core.RoleUser, "use calc.evaluate 6*7")}
	req.Tools = []core.ToolSpec{{Plugin: "calc", Action: "evaluate", Params: []core.ToolParam{{Name: "expression"}}}}
	r, err = c.Complete(req)
	if err != nil || len(r.ToolCalls) != 1 || r.ToolCalls[0].Args["expression"] != "6*7" || r.StopReason != "tool_calls" {
		t.Fatalf("tool call = %+v %v", r, err)
	}
	req.Messages = append(req.Messages, core.ChatMessage{Role: core.RoleAssistant, ToolCalls: r.ToolCalls}, core.ChatMessage{Role: core.RoleTool, ToolCallID: "call_1", Content: "42"})
	if r, _ := c.Complete(req); r.Text != "The tool answered: 42" {
		t.Fatalf("after the tool = %+v", r)
	}
	req.Messages = []core.ChatMessage{msg(core.RoleUser, "rate limit me please")}
	if _, err := c.Complete(req); core.ErrorKind(err) != core.KindRateLimited || core.RetryAfter(err) != 30*time.Second {
		t.Fatalf("rate limit = %v", err)
	}
}
