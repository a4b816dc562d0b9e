package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// benchPlan is the scripted task: three plugin calls in order.
var benchPlan = []core.ToolCall{
	{Plugin: "notes", Action: "add", Args: map[string]string{"text": "buy milk"}},
	{Plugin: "notes", Action: "list"},
	{Plugin: "calc", Action: "evaluate", Args: map[string]string{"expression": "12*3"}},
}

// planningLLM is the fake model of the benchmark: it plans the task step
// by step (one tool call per turn) unless its system prompt holds a
// recalled plan with the three tools, then it calls all three in one
// turn; after the third result it answers. Input tokens are the request
// body's bytes / 4 (tools, system prompt and messages included).
func planningLLM(r providertest.Received) providertest.Script {
	done := 0
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != core.RoleUser; i-- {
		if r.Messages[i].Role == core.RoleTool {
			done++
		}
	}
	s := providertest.Script{}
	switch {
	case done >= len(benchPlan):
		s.Text = "Saved the note, listed your notes, and 12*3 is 36."
	case strings.Contains(r.System, "Past plans") && strings.Contains(r.System, "notes.add, notes.list, calc.evaluate"):
		s.ToolCalls = benchPlan
	default:
		s.ToolCalls = benchPlan[done : done+1]
	}
	s.Usage = &core.Usage{InputTokens: len(r.Body) / 4, OutputTokens: len(s.Text)/4 + 20*len(s.ToolCalls) + 1}
	return s
}

// BenchmarkWorkflowRecall runs the scripted three-step task twice for a
// fresh user (real router over HTTP to a fake OpenAI-compatible server,
// the notes and calc example plugins as processes, SQLite memory): the
// first run plans step by step, the second (in a new session) finds the
// recorded workflow in its prompt and plans in one turn. It reports LLM calls and tokens
// of each run.
func BenchmarkWorkflowRecall(b *testing.B) {
	db, err := store.Open(context.Background(), b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	tools := startPluginsWith(b, db, buildPlugin(b, "notes"), buildPlugin(b, "calc"))
	srv := providertest.NewOpenAI(b)
	srv.SetReply(planningLLM)
	router := newRouter(b, routing.Options{
		Providers: map[string]provider.Provider{"fake": provider.NewOpenAI(provider.Options{ID: "fake", BaseURL: srv.BaseURL()})},
		Catalog:   []routing.Model{{Ref: "fake/m", Weight: 50, ContextWindow: 128_000}},
	})
	o := New(Options{LLM: router, Store: db, Generator: router, Tools: tools, Memory: Memory{Tools: true, RecallTokens: 400, Workflows: 3}})
	ctx := context.Background()
	var calls, tokens [2]int
	i := 0
	for b.Loop() {
		i++
		conv := core.ConversationKey{Channel: "bench", Chat: fmt.Sprint(i)}
		for run, text := range []string{
			"add a note to buy milk, then list my notes and compute 12*3",
			"please add a note to buy milk, list my notes and then compute 12*3 for me",
		} {
			sess, err := db.ActiveSession(ctx, conv)
			if err != nil {
				b.Fatal(err)
			}
			before := srv.Count()
			req := int64(i*10 + run)
			ans, err := o.Answer(ctx, core.Turn{RequestID: req, Session: sess, Text: text,
				In: core.Inbound{Conversation: conv, UserID: fmt.Sprint("user-", i), Text: text}})
			if err != nil {
				b.Fatal(err)
			}
			r := &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: conv, Text: ans.Text, Parts: []string{ans.Text}, Model: ans.Model, TaskType: ans.TaskType}
			if _, err := db.SaveReply(ctx, r, ans.Messages); err != nil {
				b.Fatal(err)
			}
			if !strings.Contains(ans.Text, "36") {
				b.Fatalf("run %d answer %q", run+1, ans.Text)
			}
			calls[run] += srv.Count() - before
			tokens[run] += ans.Usage.InputTokens + ans.Usage.OutputTokens
			// The second run starts a fresh session (/new): what it knows
			// of the first comes from workflow memory alone.
			if _, err := db.NewSession(ctx, conv); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(calls[0])/float64(i), "run1-llm-calls")
	b.ReportMetric(float64(calls[1])/float64(i), "run2-llm-calls")
	b.ReportMetric(float64(tokens[0])/float64(i), "run1-tokens")
	b.ReportMetric(float64(tokens[1])/float64(i), "run2-tokens")
}
