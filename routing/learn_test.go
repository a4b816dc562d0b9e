package routing

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestDecayWithFakeClock(t *testing.T) {
	r, _, _, st, clk := newTestRouter(t, func(o *Options) { o.DecayDays = 30 })
	ctx := context.Background()
	for range 8 {
		r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, Model: "cheap", TaskType: TaskChat, At: clk.Now()})
	}
	rows, _ := st.Affinities(ctx)
	if len(rows) != 1 || rows[0].Model != "p/cheap" || rows[0].Pos != 8 {
		t.Fatalf("rows = %+v", rows)
	}
	for _, tc := range []struct {
		after time.Duration
		want  float64
	}{{0, 8}, {15 * 24 * time.Hour, 4}, {30 * 24 * time.Hour, 2}, {45 * 24 * time.Hour, 1}} {
		got := ScoreOf(rows[0], clk.Now().Add(tc.after), 30)
		if math.Abs(got.Evidence-tc.want) > 1e-9 || got.Score != 1 || got.Positives != 8 {
			t.Errorf("after %v: %+v, want evidence %v", tc.after, got, tc.want)
		}
	}
	// A negative signal 15 days later lands on the halved evidence: 4 vs 1.
	clk.Advance(15 * 24 * time.Hour)
	r.RecordSignal(ctx, core.Signal{Kind: core.SignalRetry, Polarity: core.Negative, Model: "p/cheap", TaskType: TaskChat, At: clk.Now()})
	rows, _ = st.Affinities(ctx)
	if s := ScoreOf(rows[0], clk.Now(), 30); math.Abs(s.Score-0.8) > 1e-9 {
		t.Fatalf("score = %+v, want 0.8", s)
	}
}

// TestWithdrawnReactionTakesItsJudgementBack: a reaction taken back is
// recorded with its own polarity and a negative weight, and takes its
// evidence back. It was recorded as the opposite verdict: a 👎 taken back
// counted as a 👍, and the row held one of each instead of nothing.
func TestWithdrawnReactionTakesItsJudgementBack(t *testing.T) {
	for _, p := range []core.Polarity{core.Negative, core.Positive} {
		t.Run(p.String(), func(t *testing.T) {
			r, _, _, st, clk := newTestRouter(t, nil)
			ctx := context.Background()
			sig := func(weight float64) {
				t.Helper()
				if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: p, Model: "cheap", TaskType: TaskChat, Weight: weight, At: clk.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			sig(1)
			sig(1)
			clk.Advance(time.Minute)
			sig(-1)
			rows, _ := st.Affinities(ctx)
			if len(rows) != 1 {
				t.Fatalf("rows = %+v", rows)
			}
			a := rows[0]
			side, count, other, otherCount := a.Neg, a.Negatives, a.Pos, a.Positives
			if p == core.Positive {
				side, count, other, otherCount = a.Pos, a.Positives, a.Neg, a.Negatives
			}
			if math.Abs(side-1) > 1e-3 || count != 1 || other != 0 || otherCount != 0 {
				t.Fatalf("two %ss, one taken back: %+v; want one left on its side and nothing on the other", p, a)
			}
			// Taken back more often than given: never below zero.
			sig(-1)
			sig(-1)
			rows, _ = st.Affinities(ctx)
			if a := rows[0]; a.Pos != 0 || a.Neg != 0 || a.Positives != 0 || a.Negatives != 0 {
				t.Fatalf("all taken back: %+v; want no evidence", a)
			}
		})
	}
}

func TestEvidenceCap(t *testing.T) {
	var a core.Affinity
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 100 {
		a = fold(a, core.Signal{Polarity: core.Positive, Weight: 1, At: at}, 15*24*time.Hour, 30)
	}
	if a.Pos != 30 || a.Positives != 100 {
		t.Fatalf("capped = %+v", a)
	}
	// Ten negatives now move the estimate to 1 - 10/30-ish quickly.
	for range 10 {
		a = fold(a, core.Signal{Polarity: core.Negative, Weight: 1, At: at}, 15*24*time.Hour, 30)
	}
	if s := a.Pos / (a.Pos + a.Neg); s > 0.75 || s < 0.6 {
		t.Fatalf("after 10 negatives: %.2f", s)
	}
}

// TestLearnsCheapestAcceptedModel: with cheap rejected for code and mid
// accepted, the router moves code to mid and keeps chat on cheap.
func TestLearnsCheapestAcceptedModel(t *testing.T) {
	r, _, _, _, clk := newTestRouter(t, nil)
	ctx := context.Background()
	sig := func(model, task string, p core.Polarity, n int) {
		for range n {
			r.RecordSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: p, Model: model, TaskType: task, At: clk.Now()})
		}
	}
	sig("p/cheap", TaskCode, core.Negative, 12)
	sig("p/cheap", TaskCode, core.Positive, 3)
	sig("p/mid", TaskCode, core.Positive, 14)
	sig("p/mid", TaskCode, core.Negative, 1)
	sig("p/cheap", TaskChat, core.Positive, 15)
	sig("p/cheap", TaskChat, core.Negative, 1)
	counts := map[string]int{}
	for range 200 {
		res, err := r.Chat(ctx, Call{TaskType: TaskCode, Req: userMsg("x")})
		if err != nil {
			t.Fatal(err)
		}
		counts["code "+res.Model]++
		res, _ = r.Chat(ctx, Call{TaskType: TaskChat, Req: userMsg("x")})
		counts["chat "+res.Model]++
	}
	if counts["code p/mid"] < 150 || counts["chat p/cheap"] < 150 {
		t.Fatalf("choices = %v", counts)
	}
}

func TestBudgetCutOff(t *testing.T) {
	ctx := context.Background()
	r, p, _, st, clk := newTestRouter(t, func(o *Options) {
		o.Catalog = append(o.Catalog, Model{Ref: "q/free", Weight: 1, Local: true})
		o.Primary = "p/big"
		o.DailyUSD = 1
	})
	conv := core.ConversationKey{Channel: "console", Chat: "c"}
	spend := func(usd float64) {
		st.AddUsage(ctx, core.UsageRecord{At: clk.Now(), Conversation: conv.String(), Model: "p/big", CostUSD: usd})
	}
	res, _ := r.Chat(ctx, Call{Conversation: conv, Req: userMsg("hi")})
	if res.Model != "p/big" {
		t.Fatalf("under budget: %s", res.Model)
	}
	spend(0.85)
	res, _ = r.Chat(ctx, Call{Conversation: conv, Req: userMsg("hi")})
	if res.Model != "q/free" || !strings.HasPrefix(res.Reason, ReasonBudget) {
		t.Fatalf("at 85%%: %s (%s)", res.Model, res.Reason)
	}
	// Without a free model, a spent budget refuses: the user reads which
	// budget, when it starts again (not Go's 5h0m0s) and what an admin
	// can do, not a config key; the log's error names the key.
	r2, _, _, st2, _ := newTestRouter(t, func(o *Options) { o.ChatDailyUSD = 0.5; o.Store = st })
	_ = st2
	_, err := r2.Chat(ctx, Call{Conversation: conv, Req: userMsg("hi")})
	left := clk.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(clk.Now())
	want := "this conversation's daily budget ($0.50) is used up for today. It starts again at 00:00 UTC (in " + core.HumanDuration(left) + "), or an admin raises it with /budget."
	if msg := core.UserMessage(err); core.ErrorKind(err) != core.KindInvalid || !strings.HasSuffix(msg, want) || strings.Contains(msg, "routing.budget") || strings.Contains(msg, "m0s") {
		t.Fatalf("refusal: user reads %q; want it to end %q", msg, want)
	}
	if !strings.Contains(err.Error(), "routing.budget.chat_daily_usd") {
		t.Fatalf("the error for the log does not name the key: %v", err)
	}
	// Yesterday's spending no longer counts.
	clk.Advance(24 * time.Hour)
	n := len(p.Calls())
	if res, err := r.Chat(ctx, Call{Conversation: conv, Req: userMsg("hi")}); err != nil || res.Model != "p/big" {
		t.Fatalf("next day: %s %v", res.Model, err)
	}
	if len(p.Calls()) != n+1 {
		t.Fatal("no call made")
	}
}
