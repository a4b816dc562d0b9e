package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// ledgerAgent defers a usage row per answer, as the router does for each
// LLM call, then fails the first `fail` answers.
type ledgerAgent struct {
	mu       sync.Mutex
	calls    int
	fail     int
	deferred int // answers whose row went into the item's Deferred
}

func (a *ledgerAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if d := core.DeferredFrom(ctx); d != nil {
		d.AddUsage(core.UsageRecord{Conversation: t.In.Conversation.String(), Model: "fake/m", CostUSD: 1})
		a.deferred++
	}
	if a.calls <= a.fail {
		return core.Answer{}, &core.Error{Kind: core.KindUnavailable, Msg: "llm failed"}
	}
	return core.Answer{Text: "answer to " + t.Text, Model: "fake/m", TaskType: "chat"}, nil
}

// The usage of a call is stored whether the item's reply is (with it) or
// not (a failed attempt): a failure loses no row of the ledger.
func TestDeferredUsageIsStoredOnEveryPath(t *testing.T) {
	ag := &ledgerAgent{fail: 2}
	r := newRigWith(t, ag, &fakeChannel{}, nil, nil)
	start := time.Now().Add(-time.Minute)
	r.accept("1", "hello")
	r.expect("answer to hello")
	r.stop()
	r.stop = nil
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if ag.calls != 3 || ag.deferred != 3 {
		t.Fatalf("agent calls %d, rows deferred %d; want 3 and 3 (the store writes deferred rows)", ag.calls, ag.deferred)
	}
	spent, err := r.db.SpentSince(context.Background(), start, "")
	if err != nil || spent != 3 {
		t.Fatalf("ledger = %v, %v; want the rows of the two failed attempts and of the answer", spent, err)
	}
}
