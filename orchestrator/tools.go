package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
)

// ToolRunner is what the agent loop needs from the plugin side.
type ToolRunner interface {
	// Tools lists the tools offered to the LLM now (plugins come and go).
	Tools() []core.ToolSpec
	// Run executes one call through the guard pipeline. It never fails:
	// every problem is an error result the LLM can read.
	Run(ctx context.Context, call core.ToolCall) core.ToolResult
	// PostProcessPrompt returns the post_process_prompt of an action that
	// declared post_process: true.
	PostProcessPrompt(plugin, action string) (string, bool)
}

// PluginTools runs the registry's plugins through the guard.
type PluginTools struct {
	Registry *plugins.Registry
	Guard    *guard.Pipeline
}

// Tools implements ToolRunner.
func (p PluginTools) Tools() []core.ToolSpec { return p.Registry.Tools() }

// Run implements ToolRunner.
func (p PluginTools) Run(ctx context.Context, call core.ToolCall) core.ToolResult {
	return p.Guard.Run(ctx, call)
}

// PostProcessPrompt implements ToolRunner.
func (p PluginTools) PostProcessPrompt(plugin, action string) (string, bool) {
	a, ok := p.Registry.Action(plugin, action)
	if !ok || !a.PostProcess || strings.TrimSpace(a.PostProcessPrompt) == "" {
		return "", false
	}
	return a.PostProcessPrompt, true
}

// maxParallelTools bounds the tool calls of one LLM turn run at once.
const maxParallelTools = 4

// loop asks the LLM, runs the tool calls it requests and feeds the
// results back, until the LLM answers without tool calls or MaxSteps LLM
// calls were made. It returns the final result (with the summed usage)
// and the history entries it added.
func (o *Orchestrator) loop(ctx context.Context, call routing.Call, msgs []core.ChatMessage) (routing.Result, []core.ChatMessage, error) {
	var tools []core.ToolSpec
	if o.o.Tools != nil {
		tools = o.o.Tools.Tools()
	}
	var (
		added []core.ChatMessage
		usage core.Usage
		res   routing.Result
		err   error
		// reason is the routing decision's reason, kept when the rest of
		// the turn sticks to the model that asked for tools.
		reason string
	)
	for step := 1; step <= o.o.MaxSteps; step++ {
		call.Req.Messages = msgs
		call.Req.Tools = tools
		res, err = o.o.LLM.Chat(ctx, call)
		if err != nil {
			return res, added, err
		}
		if res.Response == nil {
			return res, added, core.Errorf(core.KindMalformed, "model %s returned no answer", res.Model)
		}
		usage.Add(res.Usage)
		if reason != "" {
			res.Reason = reason
		}
		if len(res.ToolCalls) == 0 || len(tools) == 0 {
			res.Usage = usage
			return res, added, nil
		}
		// The rest of the turn stays on the model that asked for the
		// tools: its tool-call ids and reasoning belong to it.
		if call.Model == "" {
			call.Model, reason = res.Model, res.Reason
		}
		if call.TaskType == "" {
			call.TaskType = res.TaskType
		}
		calls := make([]core.ToolCall, len(res.ToolCalls))
		for i, c := range res.ToolCalls {
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d", step, i+1)
			}
			calls[i] = c
		}
		asked := core.ChatMessage{Role: core.RoleAssistant, Content: res.Text, ToolCalls: calls}
		msgs = append(msgs, asked)
		added = append(added, asked)
		for i, r := range o.runTools(ctx, call, calls) {
			tm := core.ChatMessage{Role: core.RoleTool, ToolCallID: calls[i].ID, Content: guard.ForLLM(r)}
			msgs = append(msgs, tm)
			added = append(added, tm)
		}
		o.log.Debug("tool step done", "step", step, "calls", len(calls))
	}
	o.log.Warn("agent loop hit orchestrator.max_steps", "max_steps", o.o.MaxSteps)
	res.Usage = usage
	res.Response = &provider.Response{Text: fmt.Sprintf("I stopped after %d steps without reaching a final answer: the task needed more tool calls than allowed (orchestrator.max_steps = %d). Here is how far I got; ask me to continue or narrow the request.%s",
		o.o.MaxSteps, o.o.MaxSteps, lastToolSummary(added)), Usage: usage, Model: res.Model}
	return res, added, nil
}

// lastToolSummary names the tools called, for the honest give-up message.
func lastToolSummary(added []core.ChatMessage) string {
	seen := map[string]bool{}
	var names []string
	for _, m := range added {
		for _, c := range m.ToolCalls {
			n := c.Plugin + "." + c.Action
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "\n\nTools used: " + strings.Join(names, ", ") + "."
}

// runTools runs the calls of one LLM turn, up to maxParallelTools at
// once; results come back in call order.
func (o *Orchestrator) runTools(ctx context.Context, parent routing.Call, calls []core.ToolCall) []core.ToolResult {
	out := make([]core.ToolResult, len(calls))
	sem := make(chan struct{}, maxParallelTools)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := o.o.Tools.Run(ctx, c)
			if r.Error == "" {
				if prompt, ok := o.o.Tools.PostProcessPrompt(c.Plugin, c.Action); ok {
					r = o.postProcess(ctx, parent, c, r, prompt)
				}
			}
			out[i] = r
		}()
	}
	wg.Wait()
	return out
}

// postProcess runs the one extra LLM call of a post_process action: the
// action's prompt as system prompt, the (guarded) plugin output as the
// user message. The refined text replaces the result, wrapped again since
// it derives from untrusted data. On failure the original result stays.
func (o *Orchestrator) postProcess(ctx context.Context, parent routing.Call, c core.ToolCall, r core.ToolResult, prompt string) core.ToolResult {
	call := routing.Call{
		Purpose:      "post_process",
		Session:      parent.Session,
		Conversation: parent.Conversation,
		UserID:       parent.UserID,
		Req: provider.Request{
			System:   prompt,
			Messages: []core.ChatMessage{{Role: core.RoleUser, Content: r.Content}},
		},
	}
	res, err := o.o.LLM.Chat(ctx, call)
	if err != nil || res.Response == nil || strings.TrimSpace(res.Text) == "" {
		o.log.Warn("post_process failed; using the plugin output as is", "plugin", c.Plugin, "action", c.Action, "err", err)
		return r
	}
	return core.ToolResult{CallID: r.CallID, Content: guard.Wrap(res.Text)}
}

// toolsSection lists the tools in the system prompt.
func toolsSection(tools []core.ToolSpec) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Tools: you may call these plugin actions when the user's request needs them. Their results arrive inside [plugin_output] blocks.\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "- %s.%s: %s\n", t.Plugin, t.Action, t.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}
