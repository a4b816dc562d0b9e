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
// calls were made (gaveUp). It returns the final result (with the summed
// usage) and the history entries it added. The tools offered are worked
// out before each call: an orchestration step narrows them as it goes.
func (o *Orchestrator) loop(ctx context.Context, tn *turn, call routing.Call, msgs []core.ChatMessage) (res routing.Result, added []core.ChatMessage, gaveUp bool, err error) {
	var (
		usage core.Usage
		// reason is the routing decision's reason, kept when the rest of
		// the turn sticks to the model that asked for tools.
		reason string
	)
	for step := 1; step <= o.o.MaxSteps; step++ {
		tools := o.offered(tn)
		call.Req.Messages = msgs
		call.Req.Tools = tools
		res, err = o.o.LLM.Chat(ctx, call)
		if err != nil {
			return res, added, false, err
		}
		if res.Response == nil {
			return res, added, false, core.Errorf(core.KindMalformed, "model %s returned no answer", res.Model)
		}
		usage.Add(res.Usage)
		if reason != "" {
			res.Reason = reason
		}
		if len(res.ToolCalls) == 0 || len(tools) == 0 {
			res.Usage = usage
			return res, added, false, nil
		}
		// The rest of the turn stays on the model that asked for the
		// tools: its tool-call ids and reasoning belong to it.
		if call.Model == "" {
			call.Model, reason = res.Model, res.Reason
		}
		call.Choice = nil
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
		for i, r := range o.runTools(ctx, tn, call, calls) {
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
	return res, added, true, nil
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
// once; results come back in call order. A call to a tool not offered
// now (outside the active step, or out of its sequence) is refused with
// an error result; built-in tools run here, plugin actions through the
// guard. Afterwards the session state learns which tools ran.
func (o *Orchestrator) runTools(ctx context.Context, tn *turn, parent routing.Call, calls []core.ToolCall) []core.ToolResult {
	out := make([]core.ToolResult, len(calls))
	refused := o.refuse(tn, calls)
	sem := make(chan struct{}, maxParallelTools)
	var wg sync.WaitGroup
	for i, c := range calls {
		if refused[i] != "" {
			out[i] = core.ToolResult{CallID: c.ID, Error: refused[i]}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if isBuiltin(c) {
				out[i] = o.runBuiltin(ctx, tn, c)
				return
			}
			if o.o.Tools == nil {
				out[i] = core.ToolResult{CallID: c.ID, Error: fmt.Sprintf("unknown tool %s.%s", c.Plugin, c.Action)}
				return
			}
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
	for i, c := range calls {
		if refused[i] != "" {
			continue
		}
		ok := out[i].Error == ""
		tn.ran = append(tn.ran, ranCall{call: c, ok: ok})
		o.used(&tn.st, c, ok)
	}
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
	b.WriteString("Tools: you may call these tools when the user's request needs them. Their results arrive inside [plugin_output] blocks.\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "- %s: %s\n", ToolName(t.Plugin, t.Action), t.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}

// ToolName is how the orchestrator names a tool in prompts, config and
// state: "plugin.action", or the bare name of a built-in tool.
func ToolName(plugin, action string) string {
	if plugin == "" {
		return action
	}
	return plugin + "." + action
}
