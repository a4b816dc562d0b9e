package routing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestCooldownSharedAcrossReplicas: two routers on two handles of one
// PostgreSQL database (two replicas). A 429 seen by one cools the
// credential for the other within Options.SharedProfiles: the other does
// not call it, and answers from the fallback.
func TestCooldownSharedAcrossReplicas(t *testing.T) {
	dsn, dir := pgtest.DSN(t), t.TempDir()
	clk := newClock()
	p, q := &fakeProvider{id: "p"}, &fakeProvider{id: "q"}
	for _, shared := range []time.Duration{time.Second, 0} {
		t.Run(fmt.Sprint("shared=", shared), func(t *testing.T) {
			rs := sharedRouters(t, dsn, dir, clk, p, q, func(_ int, o *Options) { o.SharedProfiles = shared })
			p.fn = nil
			for _, r := range rs { // both answer, and have read the profiles
				if res, err := r.Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || res.Model != "p/cheap" {
					t.Fatalf("warm-up: %q, %v", res.Model, err)
				}
			}
			p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
				return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429", RetryAfter: 10 * time.Minute}
			}
			if res, err := rs[0].Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || res.Model != "q/other" {
				t.Fatalf("replica 0 after the 429: %q, %v; want the fallback", res.Model, err)
			}
			before := len(p.Calls())
			clk.Advance(time.Second)
			res, err := rs[1].Chat(context.Background(), Call{Req: userMsg("hi")})
			called := len(p.Calls()) - before
			if shared > 0 && (err != nil || res.Model != "q/other" || called != 0) {
				t.Fatalf("replica 1 a second after replica 0's 429: %q, %v, %d call(s) to the cooling credential; want none, answered by the fallback", res.Model, err, called)
			}
			if shared == 0 && called == 0 {
				t.Fatal("without shared profile state replica 1 still knew of the cooldown: the test cannot tell")
			}
			clk.Advance(time.Hour) // the cooldown ends for the next run
			p.fn = nil
			for _, r := range rs {
				r.Chat(context.Background(), Call{Req: userMsg("hi")})
			}
		})
	}
}

// TestASuccessElsewhereEndsAStaleCooldown (found by a soak of three
// replicas): replica 0's second 429 climbs the ladder and cools the
// credential 10 s; replica 1, whose copy of the state still has the first
// cooldown (ended) and not yet the second, tries it and gets an answer.
// Replica 0 kept its cooldown (a later cooldown alone won the merge) and
// answered from the fallback, or kept its messages waiting, while the
// other replicas answered from the credential. Now its next read of the
// shared state ends the cooldown and tells OnBack (its waiting messages
// wake).
func TestASuccessElsewhereEndsAStaleCooldown(t *testing.T) {
	dsn, dir := pgtest.DSN(t), t.TempDir()
	clk := newClock()
	p, q := &fakeProvider{id: "p"}, &fakeProvider{id: "q"}
	back := make(chan string, 4)
	rs := sharedRouters(t, dsn, dir, clk, p, q, func(i int, o *Options) {
		o.SharedProfiles = time.Second
		o.OnBack = func(prov string) { back <- fmt.Sprint(i, prov) }
	})
	chat := func(i int, want, when string) {
		t.Helper()
		if res, err := rs[i].Chat(context.Background(), Call{Req: userMsg("hi")}); err != nil || res.Model != want {
			t.Fatalf("replica %d %s: %q, %v; want %s", i, when, res.Model, err, want)
		}
	}
	chat(0, "p/cheap", "warming up")
	chat(1, "p/cheap", "warming up")
	limited := true
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		if limited {
			return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429", RetryAfter: 2 * time.Second}
		}
		return &provider.Response{Text: "ok"}, nil
	}
	chat(0, "q/other", "after the first 429") // cooling 2 s
	clk.Advance(1900 * time.Millisecond)
	chat(1, "q/other", "having read the first cooldown")
	clk.Advance(150 * time.Millisecond)
	chat(0, "q/other", "after the second 429") // the ladder: 10 s
	limited = false
	clk.Advance(50 * time.Millisecond)
	chat(1, "p/cheap", "once the first cooldown ended, before reading the second")
	clk.Advance(time.Second)
	chat(0, "p/cheap", "after replica 1's success (its cooldown ended)")
	deadline := time.After(10 * time.Second)
	for got := ""; got != "0p"; {
		select {
		case got = <-back: // replica 1 told its own ("1p")
		case <-deadline:
			t.Fatal("replica 0 did not tell OnBack that the provider is back")
		}
	}
}

// sharedRouters builds two routers on two handles of the PostgreSQL
// database dsn (two replicas): primary p/cheap on p with one credential,
// fallback q/other; mod changes each one's options.
func sharedRouters(t *testing.T, dsn, dir string, clk *fakeClock, p, q *fakeProvider, mod func(i int, o *Options)) []*Router {
	t.Helper()
	var rs []*Router
	for i := range 2 {
		db, err := store.Open(context.Background(), dir, store.Options{Postgres: &store.Postgres{DSN: dsn}, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		o := Options{Providers: map[string]provider.Provider{"p": p, "q": q}, Catalog: testCatalog(), Store: db, Now: clk.Now, Seed: uint64(i + 1),
			Primary: "p/cheap", Fallbacks: []string{"q/other"}, Probe: Probing{Off: true},
			Profiles: map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}}}}
		mod(i, &o)
		r, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestJudgeBudgetSharedAcrossReplicas: routing.judge.daily_usd caps the
// judge's spend per day for the bot, not per replica. Replica 0's judge
// spends the day's budget; replica 1, a shared-state read later, judges
// nothing more that day (before, each replica counted its own judge's
// spend in memory: N replicas spent N times the cap, and a restart began
// the day afresh).
func TestJudgeBudgetSharedAcrossReplicas(t *testing.T) {
	dsn, dir := pgtest.DSN(t), t.TempDir()
	clk := newClock()
	p, q := &fakeProvider{id: "p"}, &fakeProvider{id: "q"}
	judged := 0
	var mu sync.Mutex
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.System == judgePrompt {
			mu.Lock()
			judged++
			mu.Unlock()
			return &provider.Response{Text: "GOOD", Usage: core.Usage{InputTokens: 1000, OutputTokens: 2}}, nil
		}
		return &provider.Response{Text: "the capital is Paris", Usage: core.Usage{InputTokens: 1000, OutputTokens: 500}}, nil
	}
	// One judge call costs about $0.00025: over the cap.
	rs := sharedRouters(t, dsn, dir, clk, p, q, func(_ int, o *Options) {
		o.SharedProfiles = time.Second
		o.Judge = Judging{Model: "cheap", Rate: 1, DailyUSD: 0.0002}
	})
	ctx := context.Background()
	chat := func(i int, purpose string) {
		t.Helper()
		if _, err := rs[i].Chat(ctx, Call{Purpose: purpose, TaskType: TaskChat, Req: userMsg("what is the capital of France?")}); err != nil {
			t.Fatal(err)
		}
		if err := rs[i].Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range rs { // both have read the shared state once (not judged)
		chat(i, "compaction")
	}
	chat(0, "chat")
	if judged != 1 {
		t.Fatalf("replica 0's answer was judged %d times; want once", judged)
	}
	clk.Advance(time.Second)
	chat(1, "chat")
	clk.Advance(time.Second)
	chat(1, "chat")
	if judged != 1 {
		t.Fatalf("the judge was called %d times today on two replicas; routing.judge.daily_usd was spent by the first call", judged)
	}
}
