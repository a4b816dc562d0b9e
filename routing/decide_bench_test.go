package routing

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

// BenchmarkDecideOnly measures the choice alone (task already
// classified), with learned affinity over six models.
func BenchmarkDecideOnly(b *testing.B) {
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
	c := Call{Req: provider.Request{Messages: conv(6, "Can you look at this and tell me why the totals are off?")}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.decide(ctx, c, TaskCode, true); err != nil {
			b.Fatal(err)
		}
	}
}
