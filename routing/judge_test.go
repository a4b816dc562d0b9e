package routing

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/store"
)

func TestParseGrade(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want core.Polarity
		ok   bool
	}{{"GOOD", core.Positive, true}, {" good.", core.Positive, true}, {"**BAD**", core.Negative, true}, {"Bad", core.Negative, true}, {"maybe", core.Neutral, false}, {"", core.Neutral, false}} {
		if got, ok := parseGrade(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("parseGrade(%q) = %v %v, want %v %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestJudgeGradesAShareOfAnswers: with routing.judge on, the judge model
// grades chat answers in the background (the question and the answer),
// its grade is a "judge" signal on the answer's model and task type, its
// calls are in the ledger as "judge", and routing.judge.daily_usd stops
// it for the day.
func TestJudgeGradesAShareOfAnswers(t *testing.T) {
	var asked []string
	grade := "GOOD"
	r, p, _, st, clk := newTestRouter(t, func(o *Options) {
		o.Judge = Judging{Model: "cheap", Rate: 1, DailyUSD: 0.0004}
	})
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.System == judgePrompt {
			asked = append(asked, req.Messages[len(req.Messages)-1].Content)
			return &provider.Response{Text: grade, Usage: core.Usage{InputTokens: 1000, OutputTokens: 2}}, nil
		}
		return &provider.Response{Text: "the capital is Paris", Usage: core.Usage{InputTokens: 1000, OutputTokens: 500}}, nil
	}
	ctx := context.Background()
	chat := func(model, purpose string) {
		t.Helper()
		if _, err := r.Chat(ctx, Call{Purpose: purpose, Model: model, TaskType: TaskChat, Req: userMsg("what is the capital of France?")}); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	chat("p/mid", "chat")
	grade = "BAD"
	chat("p/mid", "chat")
	chat("p/mid", "compaction") // nobody reads a compaction: not judged
	if len(asked) != 2 || !strings.Contains(asked[0], "what is the capital of France?") || !strings.Contains(asked[0], "the capital is Paris") {
		t.Fatalf("the judge was asked %q", asked)
	}
	var judged []core.Signal
	for _, s := range st.Signals() {
		if s.Kind == SignalJudge {
			judged = append(judged, s)
		}
	}
	if len(judged) != 2 || judged[0].Polarity != core.Positive || judged[1].Polarity != core.Negative ||
		judged[0].Model != "p/mid" || judged[0].TaskType != TaskChat || judged[0].Weight != JudgeWeight {
		t.Fatalf("judge signals %+v", judged)
	}
	judgeCost := 0.0
	for _, u := range st.Usage() {
		if u.Purpose == PurposeJudge {
			judgeCost += u.CostUSD
			if u.Model != "p/cheap" {
				t.Fatalf("judge call on %s", u.Model)
			}
		}
	}
	if judgeCost == 0 {
		t.Fatal("the judge's calls are not in the ledger")
	}
	// Each grade costs $0.00025: two pass the $0.0004 cap; no more grades
	// today, some tomorrow.
	chat("p/mid", "chat")
	if len(asked) != 2 {
		t.Fatalf("the judge graded past routing.judge.daily_usd: %d grades", len(asked))
	}
	clk.Advance(24 * time.Hour)
	chat("p/mid", "chat")
	if len(asked) != 3 {
		t.Fatalf("the judge did not grade the next day: %d grades", len(asked))
	}
}

// An answer the provider cut, at the output token limit or by its safety
// filter, is not graded: the judge would count the cut against the
// model's quality.
func TestJudgeSkipsACutAnswer(t *testing.T) {
	for _, stop := range []string{"length", "content_filter", "refusal", "stop"} {
		judged := 0
		r, p, _, _, _ := newTestRouter(t, func(o *Options) {
			o.Judge = Judging{Model: "cheap", Rate: 1}
		})
		p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
			if req.System == judgePrompt {
				judged++
				return &provider.Response{Text: "BAD"}, nil
			}
			return &provider.Response{Text: "the capital is", StopReason: stop}, nil
		}
		ctx := context.Background()
		if _, err := r.Chat(ctx, Call{Purpose: "chat", Model: "p/mid", TaskType: TaskChat, Req: userMsg("what is the capital of France?")}); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[stop == "stop"]; judged != want {
			t.Errorf("stop reason %q: the judge graded %d answers; want %d", stop, judged, want)
		}
	}
}

// TestSweepAbandoned: an answer nothing followed for AbandonAfter is
// recorded as abandoned, once; its weight (0 by default) leaves the
// affinity untouched, and a later verdict on it is still recorded.
func TestSweepAbandoned(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	db, err := store.Open(ctx, t.TempDir(), store.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := New(Options{Providers: map[string]provider.Provider{"p": &fakeProvider{id: "p"}, "q": &fakeProvider{id: "q"}}, Catalog: testCatalog(), Store: db, Now: clock, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "local"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.SaveReply(ctx, &core.Reply{RequestID: 1, SessionID: sess.ID, Conversation: sess.Conversation, Text: "x", Parts: []string{"x"}, Model: "p/mid", TaskType: TaskCode}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.SweepAbandoned(ctx); err != nil || n != 0 {
		t.Fatalf("swept %d (%v) before AbandonAfter", n, err)
	}
	now = now.Add(AbandonAfter + time.Minute)
	if n, err := r.SweepAbandoned(ctx); err != nil || n != 1 {
		t.Fatalf("SweepAbandoned = %d, %v; want 1", n, err)
	}
	if n, _ := r.SweepAbandoned(ctx); n != 0 {
		t.Fatalf("the second sweep recorded %d more", n)
	}
	sigs, err := db.SignalsForReply(ctx, id)
	if err != nil || len(sigs) != 1 || sigs[0].Kind != SignalAbandoned || sigs[0].Polarity != core.Negative || sigs[0].Model != "p/mid" || sigs[0].TaskType != TaskCode {
		t.Fatalf("signals of the answer: %+v, %v", sigs, err)
	}
	if affs, _ := db.Affinities(ctx); len(affs) != 0 {
		t.Fatalf("an abandonment weighted %v changed the affinity: %+v", AbandonedWeight, affs)
	}
}

// TestJudgeCostIsInTheLedgerAfterItsItemEnded: the judge grades after
// the answer's item has stored its reply with its deferred writes
// (core.Deferred, without a budget), so its own ledger row is written at
// once, not handed to that item, where nothing would write it.
func TestJudgeCostIsInTheLedgerAfterItsItemEnded(t *testing.T) {
	r, p, _, st, _ := newTestRouter(t, func(o *Options) {
		o.Judge = Judging{Model: "cheap", Rate: 1, DailyUSD: 1}
	})
	release := make(chan struct{})
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.System == judgePrompt {
			<-release
			return &provider.Response{Text: "GOOD", Usage: core.Usage{InputTokens: 1000, OutputTokens: 2}}, nil
		}
		return &provider.Response{Text: "the capital is Paris", Usage: core.Usage{InputTokens: 1000, OutputTokens: 500}}, nil
	}
	d := &core.Deferred{Owner: st}
	ctx := core.WithDeferred(context.Background(), d)
	if _, err := r.Chat(ctx, Call{Purpose: "chat", Model: "p/mid", TaskType: TaskChat, Req: userMsg("what is the capital of France?")}); err != nil {
		t.Fatal(err)
	}
	// The item stores its reply with what it deferred; it ends.
	usage, signals := d.Pending()
	d.Written(len(usage), signals, make([]int64, len(signals)))
	close(release)
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var purposes []string
	for _, u := range st.Usage() {
		purposes = append(purposes, u.Purpose)
	}
	if len(usage) != 1 || !slices.Contains(purposes, PurposeJudge) {
		t.Fatalf("deferred %d usage rows with the item; the ledger has %v, want the judge's row in it", len(usage), purposes)
	}
	if left, _ := d.Pending(); len(left) != 0 {
		t.Fatalf("%d usage rows were handed to the ended item", len(left))
	}
}

// TestJudgeBudgetSurvivesARestart: routing.judge.daily_usd spent before a
// restart stays spent after it (the day's spend is the ledger's, not a
// counter that starts at zero with the process).
func TestJudgeBudgetSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	judged := 0
	p, q := &fakeProvider{id: "p"}, &fakeProvider{id: "q"}
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.System == judgePrompt {
			judged++
			return &provider.Response{Text: "GOOD", Usage: core.Usage{InputTokens: 1000, OutputTokens: 2}}, nil
		}
		return &provider.Response{Text: "the capital is Paris", Usage: core.Usage{InputTokens: 1000, OutputTokens: 500}}, nil
	}
	ctx := context.Background()
	for run := range 2 { // the same SQLite file, opened again: a restart
		db, err := store.Open(ctx, dir, store.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{Providers: map[string]provider.Provider{"p": p, "q": q}, Catalog: testCatalog(), Store: db, Now: clk.Now,
			Primary: "p/cheap", Fallbacks: []string{"q/other"}, Probe: Probing{Off: true},
			Judge: Judging{Model: "cheap", Rate: 1, DailyUSD: 0.0002}}) // one judge call is over the cap
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Chat(ctx, Call{Purpose: "chat", TaskType: TaskChat, Req: userMsg("what is the capital of France?")}); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if judged != 1 {
			t.Fatalf("run %d: the judge was called %d times today; routing.judge.daily_usd was spent by the first call", run, judged)
		}
	}
}
