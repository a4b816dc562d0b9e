package routing

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

func conv(turns int, last string) []core.ChatMessage {
	var out []core.ChatMessage
	for i := 0; i < turns-1; i++ {
		out = append(out, core.ChatMessage{Role: core.RoleUser, Content: "earlier"}, core.ChatMessage{Role: core.RoleAssistant, Content: "ok"})
	}
	return append(out, core.ChatMessage{Role: core.RoleUser, Content: last})
}

func TestClassify(t *testing.T) {
	long := strings.Repeat("The quarterly figures show growth in three regions. ", 30)
	structured := "Compare these two plans for our migration:\n1. Move the database first, then the services.\n2. Move the services first.\n- risk\n- cost\n" + strings.Repeat("Consider downtime, staffing and rollback in detail. ", 12)
	for _, tc := range []struct {
		name string
		msgs []core.ChatMessage
		want string
	}{
		{"greeting", conv(1, "hi, how are you?"), TaskChat},
		{"short question", conv(1, "What's the capital of Peru?"), TaskChat},
		{"code block", conv(1, "why does this fail?\n```go\nfmt.Println(x)\n```"), TaskCode},
		{"indented code", conv(1, "look:\n    x := 1\n    y := 2"), TaskCode},
		{"code keyword", conv(1, "Write a Python function that reverses a list"), TaskCode},
		{"stack trace", conv(1, "I get panic: runtime error: index out of range"), TaskCode},
		{"translate", conv(1, "Translate 'good morning' into Japanese"), TaskTransform},
		{"summarize", conv(1, "Please summarize the text below"), TaskTransform},
		{"german transform", conv(1, "Übersetze das bitte ins Englische"), TaskTransform},
		{"russian transform", conv(1, "Переведи на английский: привет"), TaskTransform},
		{"long unstructured", conv(1, long), TaskAnalysis},
		{"long structured", conv(1, structured), TaskAnalysis},
		{"deep conversation", conv(12, "and what about the next one?"), TaskDeep},
		{"deep but code", conv(12, "```sql\nselect 1\n```"), TaskCode},
		{"ten turns is not deep", conv(10, "and then?"), TaskChat},
		{"empty", nil, TaskChat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Classifier{}).Classify(tc.msgs); got != tc.want {
				t.Fatalf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	msgs := conv(6, "Can you look at this and tell me why the totals are off? The numbers come from the monthly export.")
	b.ReportAllocs()
	for b.Loop() {
		_ = (Classifier{}).Classify(msgs)
	}
}

// BenchmarkRouteDecision measures classify + choose with learned
// affinity over five models (the hot path before the LLM call).
func BenchmarkRouteDecision(b *testing.B) {
	cat := append(testCatalog(), Model{Ref: "q/small", Alias: "small", Weight: 95, CostIn: 0.1, CostOut: 0.4})
	r, err := New(Options{
		Providers: map[string]provider.Provider{"p": &fakeProvider{id: "p"}, "q": &fakeProvider{id: "q"}},
		Catalog:   cat, Store: NewMemStore(), Seed: 1,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, m := range cat {
		for _, task := range TaskTypes {
			for i := range 10 {
				pol := core.Positive
				if i%3 == 0 {
					pol = core.Negative
				}
				r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: pol, Model: m.Ref, TaskType: task})
			}
		}
	}
	r.load(ctx)
	msgs := conv(6, "Can you look at this and tell me why the totals are off? The numbers come from the monthly export.")
	c := Call{Req: provider.Request{Messages: msgs}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		task := r.o.Classifier.Classify(c.Req.Messages)
		if _, err := r.decide(ctx, c, task, true); err != nil {
			b.Fatal(err)
		}
	}
}
