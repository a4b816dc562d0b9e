package config

import (
	"strings"
	"testing"
	"time"
)

func TestMemoryKeys(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.State
	if s.SessionTTL.D() != 24*time.Hour || !s.Compaction.Notify || s.Compaction.Model != "" ||
		!s.Memory.Tools || s.Memory.RecallTokens != 400 || s.Memory.Workflows != 3 || len(cfg.Orchestrator.Steps) != 0 {
		t.Fatalf("defaults: state %+v, steps %+v", s, cfg.Orchestrator.Steps)
	}
	cfg, err = Load(writeConfig(t, minimal+`state:
  session_ttl: 0
  compaction: { model: fake/big, notify: false }
  memory: { tools: false, recall_tokens: 0, workflows: 0, admins: ["telegram:42", "console:local"] }
orchestrator:
  steps:
    - name: deploy
      when: "\\bdeploy\\b"
      tools: [git.pull, ci.build, memory_search]
      sequence: true
`), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	s = cfg.State
	if s.SessionTTL != 0 || s.Compaction.Notify || s.Compaction.Model != "fake/big" || s.Memory.Tools || s.Memory.Workflows != 0 || len(s.Memory.Admins) != 2 {
		t.Fatalf("explicit values: %+v", s)
	}
	st := cfg.Orchestrator.Steps
	if len(st) != 1 || st[0].Name != "deploy" || st[0].When != `\bdeploy\b` || len(st[0].Tools) != 3 || !st[0].Sequence {
		t.Fatalf("steps = %+v", st)
	}
}

func TestMemoryKeyErrors(t *testing.T) {
	_, err := Load(writeConfig(t, minimal+`state:
  session_ttl: -1h
  compaction: { model: nope }
  memory: { recall_tokens: -5, admins: [bob] }
orchestrator:
  steps:
    - name: a
      when: "(unclosed"
      tools: [pull]
    - name: a
      tools: []
`), noEnv())
	ps := problemsOf(t, err)
	msg := err.Error()
	for _, want := range []string{
		`state.session_ttl: duration "-1h" must not be negative`,
		`state.compaction.model: unknown model "nope"`,
		"state.memory.recall_tokens: must be at least 0",
		`state.memory.admins[0]: "bob" is not "<channel>:<user id>"`,
		"orchestrator.steps[0].when: not a valid Go regular expression",
		`orchestrator.steps[0].tools[0]: "pull" is neither "plugin.action" nor a built-in tool (memory_save, memory_search, memory_forget)`,
		`orchestrator.steps[1].name: step "a" is defined twice`,
		"orchestrator.steps[1].when: missing",
		"orchestrator.steps[1].tools: missing",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if len(ps) != 9 {
		t.Errorf("want 9 problems, got %d:\n%s", len(ps), msg)
	}
	// Each names its line.
	mustContain(t, msg, "config.yaml:10: state.session_ttl", "config.yaml:16: orchestrator.steps[0].when")
}
