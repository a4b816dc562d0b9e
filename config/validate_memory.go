package config

import (
	"fmt"
	"regexp"
	"strings"
)

// BuiltinTools lists the tools that run inside the core rather than in a
// plugin; an orchestration step may name them without a plugin.
func BuiltinTools() []string { return []string{"memory_save", "memory_search", "memory_forget"} }

// validateMemory checks state.memory and orchestrator.steps (a negative
// state.session_ttl is refused by its decoder, state.compaction.model with
// the other model references).
func validateMemory(c *Config, ps *problems) {
	m := c.State.Memory
	atLeast(ps, "state.memory.recall_tokens", m.RecallTokens, 0)
	atLeast(ps, "state.memory.workflows", m.Workflows, 0)
	for i, a := range m.Admins {
		if ch, user, ok := strings.Cut(a, ":"); !ok || ch == "" || user == "" {
			ps.at(fmt.Sprintf("state.memory.admins[%d]", i), "%q is not \"<channel>:<user id>\" (for example \"telegram:123456789\" or \"console:local\")", a)
		}
	}
	names := map[string]bool{}
	for i, s := range c.Orchestrator.Steps {
		path := fmt.Sprintf("orchestrator.steps[%d]", i)
		switch {
		case strings.TrimSpace(s.Name) == "":
			ps.at(path+".name", "missing; give the step a name (shown by /status)")
		case names[s.Name]:
			ps.at(path+".name", "step %q is defined twice", s.Name)
		}
		names[s.Name] = true
		if strings.TrimSpace(s.When) == "" {
			ps.at(path+".when", "missing; a regular expression matched against each user message (\".\" matches any message)")
		} else if _, err := regexp.Compile("(?i)" + s.When); err != nil {
			ps.at(path+".when", "not a valid Go regular expression: %v", err)
		}
		if len(s.Tools) == 0 {
			ps.at(path+".tools", "missing; list the tools of the step as \"plugin.action\"")
		}
		for j, t := range s.Tools {
			if !validStepTool(t) {
				ps.at(fmt.Sprintf("%s.tools[%d]", path, j), "%q is neither \"plugin.action\" nor a built-in tool (%s)", t, strings.Join(BuiltinTools(), ", "))
			}
		}
	}
}

func validStepTool(t string) bool {
	if p, a, ok := strings.Cut(t, "."); ok {
		return p != "" && a != "" && !strings.ContainsAny(t, " \t")
	}
	for _, b := range BuiltinTools() {
		if t == b {
			return true
		}
	}
	return false
}
