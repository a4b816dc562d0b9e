package orchestrator

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Step is one orchestration step (orchestrator.steps): while it is a
// conversation's active step, the LLM is offered only its tools — with
// Sequence, one at a time in order, moving on as each call succeeds.
type Step struct {
	Name string
	// When activates the step for a user message it matches.
	When *regexp.Regexp
	// Tools are ToolName names ("plugin.action" or a built-in tool).
	Tools    []string
	Sequence bool
}

// maxRecentTools bounds the recently used tools kept per session.
const maxRecentTools = 10

func cloneState(s core.SessionState) core.SessionState {
	s.RecentTools = slices.Clone(s.RecentTools)
	return s
}

func (o *Orchestrator) step(name string) *Step {
	for i := range o.o.Steps {
		if o.o.Steps[i].Name == name {
			return &o.o.Steps[i]
		}
	}
	return nil
}

// activateStep makes the first step whose When matches text the active
// one (from its first tool, unless it is already active). A message that
// matches no step leaves the active step as it is. Without configured
// steps the session has no step state.
func (o *Orchestrator) activateStep(st *core.SessionState, text string) {
	if len(o.o.Steps) == 0 || o.step(st.Step) == nil {
		st.Step, st.StepIndex = "", 0
	}
	for _, s := range o.o.Steps {
		if s.When != nil && s.When.MatchString(text) {
			if st.Step != s.Name {
				st.Step, st.StepIndex = s.Name, 0
			}
			return
		}
	}
}

// allowed returns the tool names the active step allows now, or nil when
// no step is active (everything is allowed).
func (o *Orchestrator) allowed(st core.SessionState) []string {
	s := o.step(st.Step)
	switch {
	case s == nil:
		return nil
	case s.Sequence && st.StepIndex < len(s.Tools):
		return s.Tools[st.StepIndex : st.StepIndex+1]
	case s.Sequence:
		return []string{}
	}
	return s.Tools
}

// offered lists the tools offered to the LLM now: the plugins' and the
// built-in memory tools, narrowed by the active step (in the step's
// order).
func (o *Orchestrator) offered(tn *turn) []core.ToolSpec {
	var all []core.ToolSpec
	if o.o.Tools != nil {
		all = append(all, safeTools(o.o.Tools.Tools())...)
	}
	all = append(all, o.builtinTools(tn)...)
	allow := o.allowed(tn.st)
	if allow == nil {
		return all
	}
	out := make([]core.ToolSpec, 0, len(allow))
	for _, name := range allow {
		for _, t := range all {
			if ToolName(t.Plugin, t.Action) == name {
				out = append(out, t)
			}
		}
	}
	if len(out) < len(allow) {
		o.log.Warn("an orchestration step names a tool no plugin offers now", "step", tn.st.Step, "tools", allow)
	}
	return out
}

// refuse returns, for each call, why it may not run now ("" = it may):
// a tool outside the active step, or, in a sequence, any call but the
// first one to the next tool of the sequence.
func (o *Orchestrator) refuse(tn *turn, calls []core.ToolCall) []string {
	out := make([]string, len(calls))
	allow := o.allowed(tn.st)
	if allow == nil {
		return out
	}
	s := o.step(tn.st.Step)
	taken := false
	for i, c := range calls {
		name := ToolName(c.Plugin, c.Action)
		switch {
		case !slices.Contains(allow, name):
			out[i] = fmt.Sprintf("tool %s is not available in the current step %q; available now: %s", name, s.Name, listOr(allow, "none (the step is finished)"))
		case s.Sequence && taken:
			out[i] = fmt.Sprintf("step %q runs its tools one at a time, in order: call %s once, then the next tool", s.Name, name)
		default:
			taken = true
		}
	}
	return out
}

// used records a tool call in the session state: the recently used
// tools, and the position in the active step's sequence when the call
// succeeded (the step ends after its last tool).
func (o *Orchestrator) used(st *core.SessionState, c core.ToolCall, ok bool) {
	name := ToolName(c.Plugin, c.Action)
	st.RecentTools = append([]string{name}, slices.DeleteFunc(st.RecentTools, func(t string) bool { return t == name })...)
	if len(st.RecentTools) > maxRecentTools {
		st.RecentTools = st.RecentTools[:maxRecentTools]
	}
	s := o.step(st.Step)
	if !ok || s == nil || !s.Sequence || st.StepIndex >= len(s.Tools) || s.Tools[st.StepIndex] != name {
		return
	}
	st.StepIndex++
	if st.StepIndex >= len(s.Tools) {
		st.Step, st.StepIndex = "", 0
	}
}

// stepSection tells the LLM about the active step.
func (o *Orchestrator) stepSection(st core.SessionState) string {
	s := o.step(st.Step)
	if s == nil {
		return ""
	}
	if s.Sequence {
		return fmt.Sprintf("Current step: %s. Its tools run one at a time in this order: %s; call them in that order (next: %s).",
			s.Name, strings.Join(s.Tools, " → "), s.Tools[min(st.StepIndex, len(s.Tools)-1)])
	}
	return fmt.Sprintf("Current step: %s. Only these tools are available in it: %s.", s.Name, strings.Join(s.Tools, ", "))
}

// stepStatus describes the active step for /status.
func (o *Orchestrator) stepStatus(st core.SessionState) string {
	if len(o.o.Steps) == 0 {
		return ""
	}
	s := o.step(st.Step)
	switch {
	case s == nil:
		return "Step: none active"
	case s.Sequence:
		return fmt.Sprintf("Step: %s — next %s (%d of %d)", s.Name, s.Tools[min(st.StepIndex, len(s.Tools)-1)], st.StepIndex+1, len(s.Tools))
	}
	return fmt.Sprintf("Step: %s — tools %s", s.Name, strings.Join(s.Tools, ", "))
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}
