package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestSignals(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	id, err := db.AddSignal(ctx, core.Signal{Kind: core.SignalRetry, Polarity: core.Negative, ReplyID: 5, Model: "p/m", TaskType: "code", UserID: "u", Weight: 1, At: at})
	if err != nil || id == 0 {
		t.Fatalf("AddSignal = %d, %v", id, err)
	}
	if _, err := db.AddSignal(ctx, core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, ReplyID: 6, Weight: 1, At: at}); err != nil {
		t.Fatal(err)
	}
	got, err := db.SignalsForReply(ctx, 5)
	if err != nil || len(got) != 1 {
		t.Fatalf("SignalsForReply = %v, %v", got, err)
	}
	if s := got[0]; s.Kind != core.SignalRetry || s.Polarity != core.Negative || s.Model != "p/m" || s.TaskType != "code" || !s.At.Equal(at) {
		t.Fatalf("signal = %+v", s)
	}
}

func TestAffinity(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	inc := func(a core.Affinity) core.Affinity {
		a.Pos++
		a.Positives++
		a.UpdatedAt, a.LastSignal = at, at
		return a
	}
	for range 3 {
		if err := db.UpdateAffinity(ctx, "code", "p/a", inc); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.UpdateAffinity(ctx, "chat", "p/a", inc); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdateAffinity(ctx, "code", "p/b", inc); err != nil {
		t.Fatal(err)
	}
	all, err := db.Affinities(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("Affinities = %v, %v", all, err)
	}
	if a := all[1]; a.Task != "code" || a.Model != "p/a" || a.Pos != 3 || a.Positives != 3 || !a.UpdatedAt.Equal(at) {
		t.Fatalf("row = %+v", a)
	}
	t.Run("reset by model", func(t *testing.T) {
		n, err := db.ResetAffinity(ctx, "", "p/b")
		if err != nil || n != 1 {
			t.Fatalf("ResetAffinity = %d, %v", n, err)
		}
	})
	t.Run("reset by task", func(t *testing.T) {
		n, err := db.ResetAffinity(ctx, "chat", "")
		if err != nil || n != 1 {
			t.Fatalf("ResetAffinity = %d, %v", n, err)
		}
		all, _ := db.Affinities(ctx)
		if len(all) != 1 || all[0].Task != "code" || all[0].Model != "p/a" {
			t.Fatalf("left = %+v", all)
		}
	})
	t.Run("reset all", func(t *testing.T) {
		n, err := db.ResetAffinity(ctx, "", "")
		if err != nil || n != 1 {
			t.Fatalf("ResetAffinity = %d, %v", n, err)
		}
	})
}

func TestProfileState(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := core.ProfileState{Provider: "anthropic", ID: "anthropic:work", Uses: 3, LastUsed: at, CooldownUntil: at.Add(5 * time.Minute), Failures: 2, LastError: "rate_limited"}
	if err := db.SaveProfileState(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Uses = 4
	if err := db.SaveProfileState(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := db.ProfileStates(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("ProfileStates = %v, %v", got, err)
	}
	if g := got[0]; g.Uses != 4 || !g.CooldownUntil.Equal(p.CooldownUntil) || !g.LastProbe.IsZero() || g.Failures != 2 || g.LastError != "rate_limited" {
		t.Fatalf("state = %+v", g)
	}
}

func TestUsageLedger(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	recs := []core.UsageRecord{
		{At: at.Add(-48 * time.Hour), Conversation: "console:a", UserID: "u1", Model: "p/a", InputTokens: 10, OutputTokens: 5, CostUSD: 5},
		{At: at, SessionID: 0, Conversation: "console:a", UserID: "u1", Model: "p/a", InputTokens: 100, OutputTokens: 50, CostUSD: 0.5},
		{At: at, Conversation: "console:b", UserID: "u2", Model: "p/b", Purpose: "lua", InputTokens: 200, OutputTokens: 20, CostUSD: 1.5},
	}
	for _, r := range recs {
		if err := db.AddUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	since := at.Add(-24 * time.Hour)
	for _, tc := range []struct {
		conv string
		want float64
	}{{"", 2}, {"console:a", 0.5}, {"console:c", 0}} {
		got, err := db.SpentSince(ctx, since, tc.conv)
		if err != nil || got != tc.want {
			t.Fatalf("SpentSince(%q) = %v, %v; want %v", tc.conv, got, err, tc.want)
		}
	}
	tot, err := db.UsageTotals(ctx, since, "model", "")
	if err != nil || len(tot) != 2 || tot[0].Key != "p/b" || tot[0].CostUSD != 1.5 || tot[1].InputTokens != 100 || tot[1].Calls != 1 {
		t.Fatalf("UsageTotals = %+v, %v", tot, err)
	}
	tot, err = db.UsageTotals(ctx, time.Time{}, "chat", "")
	if err != nil || len(tot) != 2 || tot[0].Key != "console:a" || tot[0].Calls != 2 || tot[0].CostUSD != 5.5 {
		t.Fatalf("UsageTotals by chat = %+v, %v", tot, err)
	}
	if _, err := db.UsageTotals(ctx, since, "color", ""); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("bad group: %v", err)
	}
}

func TestLastAnswerSkipsCommandReplies(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "console", Chat: "x"}
	s, err := db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := db.LastAnswer(ctx, s.ID); err != nil || r != nil {
		t.Fatalf("empty: %v %v", r, err)
	}
	for i, model := range []string{"p/a", ""} {
		r := &core.Reply{RequestID: int64(i + 1), SessionID: s.ID, Conversation: conv, Text: "t", Parts: []string{"t"}, Model: model, TaskType: "chat"}
		if _, err := db.SaveReply(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, err := db.LastAnswer(ctx, s.ID)
	if err != nil || r == nil || r.Model != "p/a" || r.RequestID != 1 {
		t.Fatalf("LastAnswer = %+v, %v", r, err)
	}
}

func TestSignalOfARequestRecordedOnce(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	calls := 0
	inc := func(a core.Affinity) core.Affinity { calls++; a.Pos++; return a }
	s := core.Signal{Kind: core.SignalReaction, Polarity: core.Positive, ReplyID: 7, Model: "m", TaskType: "chat", Weight: 1, RequestID: 42}
	for range 2 {
		if _, err := db.AddSignalAndAffinity(ctx, s, "chat", "m", inc); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := db.AddSignal(ctx, s); err != nil || id != 0 {
		t.Fatalf("AddSignal of a recorded request = %d, %v; want 0", id, err)
	}
	sigs, _ := db.SignalsForReply(ctx, 7)
	if len(sigs) != 1 || calls != 1 {
		t.Fatalf("signals %d, affinity updates %d; want 1 and 1", len(sigs), calls)
	}
	// Signals outside a request are all kept.
	s.RequestID = 0
	db.AddSignal(ctx, s)
	db.AddSignal(ctx, s)
	if sigs, _ := db.SignalsForReply(ctx, 7); len(sigs) != 3 {
		t.Fatalf("signals = %d, want 3", len(sigs))
	}
}

func TestEscalationRoundTrip(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	sess, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "c", Chat: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := db.Escalation(ctx, sess.ID); err != nil || st.Question != "" || st.Models != nil {
		t.Fatalf("empty state = %+v, %v", st, err)
	}
	want := core.EscalationState{Question: "q", Models: []string{"a/b", "c/d"}}
	if err := db.SaveEscalation(ctx, sess.ID, want); err != nil {
		t.Fatal(err)
	}
	want.Models = append(want.Models, "e/f")
	if err := db.SaveEscalation(ctx, sess.ID, want); err != nil {
		t.Fatal(err)
	}
	got, err := db.Escalation(ctx, sess.ID)
	if err != nil || got.Question != "q" || strings.Join(got.Models, ",") != "a/b,c/d,e/f" {
		t.Fatalf("state = %+v, %v", got, err)
	}
}
