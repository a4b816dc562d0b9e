package orchestrator

import (
	"context"
	"fmt"
	"strings"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
)

// maxTriggerBytes bounds the request text kept as a workflow's trigger.
const maxTriggerBytes = 500

// workflowSteps are the plugin actions of the turn that succeeded, in the
// order they ran (built-in tools are not steps of a plan).
func workflowSteps(ran []ranCall) []core.WorkflowStep {
	var out []core.WorkflowStep
	for _, r := range ran {
		if r.ok && !isBuiltin(r.call) && r.call.Plugin != "" {
			out = append(out, core.WorkflowStep{Plugin: r.call.Plugin, Action: r.call.Action, Order: len(out) + 1})
		}
	}
	return out
}

// recordWorkflow saves the turn's plan as a workflow of the user when the
// answer took two or more successful plugin calls. A later rejection of
// the answer marks it failed (store: the signals trigger).
func (o *Orchestrator) recordWorkflow(ctx context.Context, tn *turn, task string) {
	if o.o.Store == nil || o.o.Memory.Workflows <= 0 || tn.owner == "" {
		return
	}
	steps := workflowSteps(tn.ran)
	if len(steps) < 2 {
		return
	}
	trigger := strings.TrimSpace(tn.t.Text)
	if trigger == "" {
		return
	}
	id, err := o.o.Store.SaveWorkflow(context.WithoutCancel(ctx), core.Memory{
		Owner: tn.owner, Place: core.MemoryPlace(tn.t.In), Content: shorten(trigger, maxTriggerBytes), Steps: steps, TaskType: task, RequestID: tn.t.RequestID,
	})
	if err != nil {
		o.log.Error("record workflow", "err", err)
		return
	}
	o.log.Debug("recorded workflow", "memory", id, "steps", len(steps))
}

// recallWorkflows is the system prompt section of the user's successful
// workflows most similar to the message (FTS5 rank on the trigger, the
// same task type ranked higher) whose tools are all offered now.
func (o *Orchestrator) recallWorkflows(ctx context.Context, tn *turn, task string, offered []core.ToolSpec) string {
	if o.o.Store == nil || o.o.Memory.Workflows <= 0 || tn.owner == "" || strings.TrimSpace(tn.t.Text) == "" || len(offered) == 0 {
		return ""
	}
	ws, err := o.o.Store.Memories(ctx, core.MemoryQuery{Owner: tn.owner, Place: core.MemoryPlace(tn.t.In), Tag: core.TagWorkflow, Outcome: core.WorkflowSucceeded,
		Text: tn.t.Text, TaskType: task, Limit: 3 * o.o.Memory.Workflows})
	if err != nil {
		o.log.Warn("recall workflows", "err", err)
		return ""
	}
	have := map[string]bool{}
	for _, t := range offered {
		have[ToolName(t.Plugin, t.Action)] = true
	}
	var b strings.Builder
	n := 0
	for _, w := range ws {
		if n == o.o.Memory.Workflows || len(w.Steps) == 0 {
			continue
		}
		names := make([]string, len(w.Steps))
		usable := true
		for i, s := range w.Steps {
			names[i] = ToolName(s.Plugin, s.Action)
			usable = usable && have[names[i]]
		}
		if !usable {
			continue
		}
		fmt.Fprintf(&b, "- %q → %s\n", guard.Escape(w.Content), strings.Join(names, ", "))
		n++
	}
	if n == 0 {
		return ""
	}
	return "Past plans: these tool sequences answered similar requests of this user well before. When one fits the request, follow it without exploring; call steps that do not need an earlier step's result together in one turn.\n" +
		strings.TrimRight(b.String(), "\n")
}
