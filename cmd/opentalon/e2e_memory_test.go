package main

// Memory and sessions through the whole App and the command line (issue
// 13): the memory tools, /memory, /forget, /status, compaction for the
// model the router picks, /compact, workflow memory with a rejection,
// and `opentalon memory` / `opentalon session export`.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// smallWindowConfig routes to a model with a small context window, so a
// few long messages overflow it; the router picks the model (no pin;
// affinity off, so the highest weight answers every message).
func smallWindowConfig(dataDir, baseURL, extra string) string {
	return fmt.Sprintf(`state:
  data_dir: %q
models:
  providers:
    fake:
      api: openai-completions
      base_url: %q
      api_key: test-key
  catalog:
    fake/small: { alias: small, weight: 80, context_window: 3000, cost: { input: 1, output: 2 } }
    fake/cheap: { alias: cheap, weight: 10, context_window: 100000, cost: { input: 0.1, output: 0.2 } }
routing:
  affinity: { enabled: false }
server:
  listen: ""
%s`, dataDir, baseURL, extra)
}

// memoryReply plays the model: it summarizes when asked to condense,
// saves "remember ..." with memory_save, reports tool results and
// otherwise answers briefly.
func memoryReply(r providertest.Received) providertest.Script {
	if strings.Contains(r.System, "You condense a chat") {
		return providertest.Script{Text: "SUMMARY-OF-OLD-TURNS"}
	}
	last := r.Messages[len(r.Messages)-1]
	if last.Role == core.RoleTool {
		return providertest.Script{Text: "noted: " + last.Content}
	}
	if text, ok := strings.CutPrefix(last.Content, "remember "); ok {
		return providertest.Script{ToolCalls: []core.ToolCall{{Action: "memory_save", Args: map[string]string{"content": text, "tags": "preference"}}}}
	}
	return providertest.Script{Text: "answer " + fmt.Sprint(len(r.Messages))}
}

func TestE2EMemoryCompactionAndExportThroughApp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(memoryReply)
	dir := t.TempDir()
	path := writeConfig(t, smallWindowConfig(dir, llm.BaseURL(), ""))
	h := startApp(t, loadConfigFile(t, path))

	h.send("remember I prefer answers in French")
	h.expect("noted: Saved as memory #1.")
	first := llm.Requests()[0]
	offered := false
	for _, tl := range first.Tools {
		offered = offered || (tl.Plugin == "" && tl.Action == "memory_save")
	}
	if !offered {
		t.Fatalf("memory_save not offered: %+v", first.Tools)
	}

	h.send("/memory")
	if out := h.readUntil("/forget"); !strings.Contains(out, "#1 I prefer answers in French [preference]") {
		t.Fatalf("/memory = %q", out)
	}
	h.send("/status")
	if out := h.readUntil("Recent tools"); !strings.Contains(out, "Last answer: fake/small (auth profile fake:default)") || !strings.Contains(out, "Recent tools: memory_save") {
		t.Fatalf("/status = %q", out)
	} else if !regexp.MustCompile(`\nSession: \d+ messages since [^\n]* \(context about [\d,]+ of [\d,]+ tokens, \d+% full\)\n`).MatchString(out) {
		t.Fatalf("/status does not say how full the context is on its Session line: %q", out)
	}

	// Long messages overflow the 3000-token window of the model the router
	// picks: the oldest turns are summarized by the cheapest model.
	filler := strings.Repeat("words to fill the context window ", 40) // ~330 tokens
	var outs []string
	for i := 0; i < 8; i++ {
		h.send(fmt.Sprintf("long message %d %s", i, filler))
		outs = append(outs, h.readUntil("answer "))
	}
	var compaction, after *providertest.Received
	reqs := llm.Requests()
	for i, r := range reqs {
		if strings.Contains(r.System, "You condense a chat") && compaction == nil {
			compaction = &reqs[i]
		} else if compaction != nil && after == nil && strings.Contains(r.System, "SUMMARY-OF-OLD-TURNS") {
			after = &reqs[i]
		}
	}
	if compaction == nil || compaction.Model != "cheap" || !strings.Contains(compaction.LastUser(), "remember I prefer answers in French") {
		t.Fatalf("no compaction call by the cheapest model with the old turns: %+v", compaction)
	}
	if after == nil {
		t.Fatal("no chat request carried the summary")
	}
	for _, m := range after.Messages {
		if strings.Contains(m.Content, "long message 0 ") {
			t.Fatalf("the LLM still saw the first long message after compaction")
		}
	}
	if !strings.Contains(after.System, "I prefer answers in French") {
		t.Fatalf("the saved preference is not recalled in the system prompt:\n%s", after.System)
	}
	notes := 0
	for _, o := range outs {
		notes += strings.Count(o, "summarized its older part")
	}
	if notes != 1 {
		t.Fatalf("the user was told %d times about compaction; want once: %q", notes, outs)
	}

	h.send("/compact")
	if out := h.next(); !strings.HasPrefix(out, "Compacted: ") {
		t.Fatalf("/compact = %q", out)
	}
	h.send("/status")
	if out := h.readUntil("Compacted"); !strings.Contains(out, "Compacted: 2×") {
		t.Fatalf("/status after /compact = %q", out)
	}
	h.send("/new")
	h.next()
	h.send("hello again")
	h.expect("answer 1") // the fresh session has no history
	h.shutdown()

	// The command line reads the same database.
	res := runMain(t, nil, "", "--config", path, "memory", "list", "--user", "console:local")
	if res.code != 0 || !strings.Contains(res.stdout, "I prefer answers in French") || !strings.Contains(res.stdout, "console:local") {
		t.Fatalf("memory list: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	if res = runMain(t, nil, "", "memory", "search", "french", "--config", path, "--json"); res.code != 0 || !strings.Contains(res.stdout, `"content": "I prefer answers in French"`) {
		t.Fatalf("memory search --json: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	res = runMain(t, nil, "", "--config", path, "session", "export", "--format", "json", "console:local")
	var doc struct {
		Conversation string `json:"conversation"`
		Sessions     []struct {
			Active   bool `json:"active"`
			Messages []struct {
				Role    string `json:"role"`
				Summary bool   `json:"summary"`
				Content string `json:"content"`
			} `json:"messages"`
			State struct {
				Compactions int      `json:"compactions"`
				RecentTools []string `json:"recent_tools"`
			} `json:"state"`
		} `json:"sessions"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &doc) != nil {
		t.Fatalf("session export json: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	if doc.Conversation != "console:local" || len(doc.Sessions) != 2 || doc.Sessions[0].Active || !doc.Sessions[1].Active {
		t.Fatalf("exported sessions = %+v; want the one ended by /new, then the active one", doc)
	}
	old := doc.Sessions[0]
	if !old.Messages[0].Summary || old.Messages[0].Role != "system" || !strings.Contains(old.Messages[0].Content, "SUMMARY-OF-OLD-TURNS") || old.State.Compactions != 2 {
		t.Fatalf("ended session = %+v", old)
	}
	out := filepath.Join(t.TempDir(), "s.yaml")
	if res = runMain(t, nil, "", "--config", path, "session", "export", "console:local", "--out", out); res.code != 0 {
		t.Fatalf("session export yaml: exit %d, %s", res.code, res.stderr)
	}
	b, _ := os.ReadFile(out)
	var ydoc map[string]any
	if err := yaml.Unmarshal(b, &ydoc); err != nil || ydoc["conversation"] != "console:local" || !strings.Contains(string(b), "content: hello again") {
		t.Fatalf("yaml export (%v):\n%s", err, b)
	}
	if res = runMain(t, nil, "", "--config", path, "session", "export", "telegram:nobody"); res.code != 1 || !strings.Contains(res.stderr, "no session of conversation telegram:nobody") {
		t.Fatalf("export of an unknown conversation: exit %d, %s", res.code, res.stderr)
	}
	if res = runMain(t, nil, "", "--config", path, "memory", "delete", "1"); res.code != 0 || !strings.Contains(res.stdout, "deleted memory 1") {
		t.Fatalf("memory delete: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	if res = runMain(t, nil, "", "--config", path, "memory", "delete", "1"); res.code != 1 || !strings.Contains(res.stderr, "no memory 1") {
		t.Fatalf("memory delete again: exit %d, %s", res.code, res.stderr)
	}
	if res = runMain(t, nil, "", "--config", path, "memory", "frob"); res.code != 2 || !strings.Contains(res.stderr, "usage: opentalon memory list") {
		t.Fatalf("memory frob: exit %d, %s", res.code, res.stderr)
	}
}

// calcTwiceReply plans "compute both" as two calc.evaluate calls, one per
// turn, or both in one turn when its prompt recalls that plan; the big
// model answers plainly.
func calcTwiceReply(r providertest.Received) providertest.Script {
	if r.Model == "big" {
		return providertest.Script{Text: "answer from big"}
	}
	done := 0
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != core.RoleUser; i-- {
		if r.Messages[i].Role == core.RoleTool {
			done++
		}
	}
	plan := []core.ToolCall{{Plugin: "calc", Action: "evaluate", Args: map[string]string{"expression": "6*7"}},
		{Plugin: "calc", Action: "evaluate", Args: map[string]string{"expression": "2+2"}}}
	switch {
	case !strings.Contains(r.LastUser(), "compute both"):
		return providertest.Script{Text: "answer from small"}
	case done >= 2:
		return providertest.Script{Text: "both computed"}
	case strings.Contains(r.System, "Past plans") && strings.Contains(r.System, "calc.evaluate, calc.evaluate"):
		return providertest.Script{ToolCalls: plan}
	}
	return providertest.Script{ToolCalls: plan[done : done+1]}
}

func TestE2EWorkflowRecalledAndRejectedThroughApp(t *testing.T) {
	t.Parallel()
	bin := pluginBinary(t, "../../plugins/examples/calc")
	pluginDir := plugintest.Dir(t) // reachable by plugins.tools.run_as when the tests run as root
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "calc"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	llm := providertest.NewOpenAI(t)
	llm.SetReply(calcTwiceReply)
	// Affinity off: small answers every first answer, big every escalation.
	path := writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), "plugins:\n  tools:\n    plugin_dir: "+pluginDir+"\nrouting:\n  affinity:\n    enabled: false\n"))
	h := startApp(t, loadConfigFile(t, path))

	h.send("compute both products for the report")
	h.expect("both computed")
	if n := llm.Count(); n != 3 {
		t.Fatalf("first request took %d LLM calls; want 3 (one per tool, then the answer)", n)
	}
	// (Asked right after, a similar request would read as a rephrase, a
	// rejection of the first answer.)
	h.send("thanks")
	h.expect("answer from small")
	h.send("please compute both products for the weekly report")
	h.expect("both computed")
	if n := llm.Count() - 4; n != 2 {
		t.Fatalf("second similar request took %d LLM calls; want 2 (the recalled plan in one turn)\n%s", n, llm.Requests()[4].System)
	}
	if r := llm.Requests()[4]; !strings.Contains(r.System, "Past plans") || !strings.Contains(r.System, "compute both products for the report") {
		t.Fatalf("second request's prompt lacks the recalled workflow:\n%s", r.System)
	}
	// The user rejects the second answer: its workflow is marked failed.
	h.send("no, try again")
	if out := h.readUntil("answer from big"); !strings.Contains(out, "Answered again by fake/big") {
		t.Fatalf("escalated answer = %q", out)
	}
	h.shutdown()

	res := runMain(t, nil, "", "--config", path, "memory", "export", "--tag", "workflow")
	var flows []struct {
		Trigger string `yaml:"trigger"`
		Steps   []struct {
			Plugin string `yaml:"plugin"`
			Action string `yaml:"action"`
			Order  int    `yaml:"order"`
		} `yaml:"steps"`
		Outcome   string    `yaml:"outcome"`
		Timestamp time.Time `yaml:"timestamp"`
	}
	if res.code != 0 || yaml.Unmarshal([]byte(res.stdout), &flows) != nil || len(flows) != 2 {
		t.Fatalf("memory export --tag workflow: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	byTrigger := map[string]string{}
	for _, f := range flows {
		if len(f.Steps) != 2 || f.Steps[1].Plugin != "calc" || f.Steps[1].Action != "evaluate" || f.Steps[1].Order != 2 || f.Timestamp.IsZero() {
			t.Fatalf("exported workflow = %+v", f)
		}
		byTrigger[f.Trigger] = f.Outcome
	}
	if byTrigger["compute both products for the report"] != "success" || byTrigger["please compute both products for the weekly report"] != "failed" {
		t.Fatalf("workflow outcomes = %v; want the rejected one failed", byTrigger)
	}
	if res = runMain(t, nil, "", "--config", path, "memory", "list", "--tag", "workflow"); res.code != 0 || !strings.Contains(res.stdout, "calc.evaluate, calc.evaluate [failed]") {
		t.Fatalf("memory list --tag workflow: %q %s", res.stdout, res.stderr)
	}
}

func TestSessionSweeperDeletesExpiredSessions(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	ctx := context.Background()
	db, err := store.Open(ctx, t.TempDir(), store.Options{Now: clk.Now, SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, _ := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "local"})
	clk.Advance(61 * time.Minute)
	if _, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "other"}); err != nil {
		t.Fatal(err)
	}
	stop := startSessionSweeper(ctx, db, time.Hour, 10*time.Millisecond, discardLogger())
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := db.Session(ctx, s.ID); core.ErrorKind(err) == core.KindNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not delete the expired session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if every := sweepEvery(24 * time.Hour); every != 10*time.Minute {
		t.Fatalf("sweep interval for 24h = %s", every)
	}
	if every := sweepEvery(2 * time.Second); every != time.Second {
		t.Fatalf("sweep interval for 2s = %s", every)
	}
}

func TestCompactionModelDefaultsToTheCheapest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := parseConfig(t, smallWindowConfig(dir, "http://127.0.0.1:1", ""))
	db, err := store.Open(context.Background(), dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := buildRouter(cfg, db, time.Now, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.CheapestModel(); got != "fake/cheap" {
		t.Fatalf("cheapest = %q", got)
	}
	// The config's built-in tool names are the orchestrator's.
	if got, want := fmt.Sprint(config.BuiltinTools()), fmt.Sprint(orchestrator.BuiltinTools()); got != want {
		t.Fatalf("config.BuiltinTools %s != orchestrator.BuiltinTools %s", got, want)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
