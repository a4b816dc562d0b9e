package store

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

func TestLearningStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_770_000_000_000).UTC()
	arm := core.RouterArm{Task: "code", Model: "p/coder",
		Drop: core.RouterRun{LLR: 4.5, Ref: 0.62, Pos: 3, Neg: 7.5}, Rise: core.RouterRun{LLR: 0.25, Ref: 0.9, Pos: 1},
		PoolPos: 2, PoolNeg: 5, Seq: core.RouterSeq{Active: true, P0: 0.4, P1: 0.8, LLR: 1.2, Pos: 3, Neg: 0.5, N: 4, Seen: 3},
		LastProbe: at.Add(-time.Hour), SettledVs: "p/mid", SettledAt: at.Add(-2 * time.Hour),
		ChangeAt: at.Add(-3 * time.Hour), ChangeDir: -1, ChangeScope: "model", UpdatedAt: at}
	model := core.RouterArm{Model: "p/coder", Drop: core.RouterRun{LLR: 7, Ref: 0.7, Pos: 1, Neg: 9}, UpdatedAt: at}
	task := core.RouterTask{Task: "code", ProbeTokens: -2.5, ProbeCost: 0.75, Choices: 412.5, ChoicesAt: at, FirstSeen: at.Add(-48 * time.Hour), Incumbent: "p/mid", UpdatedAt: at}
	sig := core.Signal{Kind: core.SignalRetry, Polarity: core.Negative, ReplyID: 3, Model: "p/coder", TaskType: "code", Weight: 1, At: at, RequestID: 11}
	inc := func(a core.Affinity) core.Affinity {
		a.Neg++
		a.Negatives++
		a.LastSignal, a.UpdatedAt = at, at
		return a
	}
	id, err := db.AddSignalAndLearn(ctx, sig, "code", "p/coder", inc, []core.RouterArm{arm, model}, []core.RouterTask{task})
	if err != nil || id == 0 {
		t.Fatalf("AddSignalAndLearn = %d, %v", id, err)
	}
	// The same request's signal again changes nothing: not the affinity,
	// not the state.
	changed := arm
	changed.Drop.LLR = 99
	if id, err := db.AddSignalAndLearn(ctx, sig, "code", "p/coder", inc, []core.RouterArm{changed}, nil); err != nil || id != 0 {
		t.Fatalf("duplicate AddSignalAndLearn = %d, %v", id, err)
	}
	db.Close()

	// A restart reads back exactly what was written.
	db, err = OpenFile(ctx, filepath.Join(dir, "opentalon.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	arms, tasks, err := db.LearningState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(arms) != 2 || !reflect.DeepEqual(arms[0], model) || !reflect.DeepEqual(arms[1], arm) {
		t.Fatalf("arms = %+v\nwant %+v and %+v", arms, model, arm)
	}
	if len(tasks) != 1 || !reflect.DeepEqual(tasks[0], task) {
		t.Fatalf("tasks = %+v, want %+v", tasks, task)
	}
	if all, _ := db.Affinities(ctx); len(all) != 1 || all[0].Neg != 1 {
		t.Fatalf("affinity = %+v", all)
	}

	t.Run("upsert one row", func(t *testing.T) {
		a := arm
		a.Seq = core.RouterSeq{}
		a.Drop.LLR = 0
		if err := db.SaveLearning(ctx, []core.RouterArm{a}, nil); err != nil {
			t.Fatal(err)
		}
		arms, tasks, _ := db.LearningState(ctx)
		if len(arms) != 2 || arms[1].Seq.Active || arms[1].Drop.LLR != 0 || arms[0].Drop.LLR != 7 || len(tasks) != 1 {
			t.Fatalf("after upsert: %+v %+v", arms, tasks)
		}
	})
	t.Run("reset by model keeps the task rows", func(t *testing.T) {
		if err := db.ResetLearning(ctx, "", "p/coder"); err != nil {
			t.Fatal(err)
		}
		arms, tasks, _ := db.LearningState(ctx)
		if len(arms) != 0 || len(tasks) != 1 {
			t.Fatalf("after reset: %+v %+v", arms, tasks)
		}
	})
	t.Run("affinity reset takes the learning state with it", func(t *testing.T) {
		if err := db.SaveLearning(ctx, []core.RouterArm{arm}, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := db.ResetAffinity(ctx, "code", ""); err != nil || n != 1 {
			t.Fatalf("ResetAffinity = %d, %v; want the one code row", n, err)
		}
		if arms, tasks, _ := db.LearningState(ctx); len(arms) != 0 || len(tasks) != 0 {
			t.Fatalf("learning state left after the affinity reset: %+v %+v", arms, tasks)
		}
		if all, _ := db.Affinities(ctx); len(all) != 0 {
			t.Fatalf("affinity left: %+v", all)
		}
	})
}

func TestExploreSpentSince(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for _, u := range []core.UsageRecord{
		{At: day.Add(-time.Hour), Model: "p/a", Purpose: "explore", CostUSD: 1},
		{At: day.Add(time.Hour), Model: "p/a", Purpose: "explore", CostUSD: 0.25},
		{At: day.Add(2 * time.Hour), Model: "p/a", Purpose: "chat", CostUSD: 4},
		{At: day.Add(3 * time.Hour), Model: "p/b", Purpose: "explore", CostUSD: 0.5},
	} {
		if err := db.AddUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.ExploreSpentSince(ctx, day); err != nil || got != 0.75 {
		t.Fatalf("ExploreSpentSince = %v, %v; want 0.75", got, err)
	}
}

func TestUnjudgedReplies(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	db := openTest(t, Options{Now: clk.Now})
	conv := core.ConversationKey{Channel: "console", Chat: "a"}
	s, err := db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "b"})
	if err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	save := func(sess core.Session, req int64, model string) int64 {
		t.Helper()
		id, err := db.SaveReply(ctx, &core.Reply{RequestID: req, SessionID: sess.ID, Conversation: sess.Conversation, Text: "x", Parts: []string{"x"}, Model: model, TaskType: "chat"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	judged := save(s, 1, "p/a")   // gets a verdict
	followed := save(s, 2, "p/a") // the user wrote again 10 minutes later
	clk.Advance(10 * time.Minute)
	save(other, 5, "")             // a command's reply: not an answer, but the user was there
	last := save(s, 3, "p/b")      // nothing followed
	alone := save(other, 4, "p/a") // nothing followed, another session
	if _, err := db.AddSignal(ctx, core.Signal{Kind: "accepted", Polarity: core.Positive, ReplyID: judged, Model: "p/a", TaskType: "chat", Weight: 1, At: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Hour)
	got, err := db.UnjudgedReplies(ctx, start.Add(-time.Minute), clk.Now().Add(-time.Hour), time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range got {
		ids = append(ids, r.ID)
		if r.Model == "" || r.TaskType != "chat" || r.CreatedAt.IsZero() || r.RequestID == 0 {
			t.Errorf("reply %+v lacks fields", r)
		}
	}
	if !reflect.DeepEqual(ids, []int64{last, alone}) {
		t.Fatalf("unjudged = %v, want %v (judged %d, followed %d)", ids, []int64{last, alone}, judged, followed)
	}
	// The user's next message (a command's reply counts: they were
	// there) within the hour means the answer was not left.
	save(other, 6, "")
	if got, _ := db.UnjudgedReplies(ctx, start.Add(-time.Minute), clk.Now().Add(-time.Hour), time.Hour, 10); len(got) != 2 {
		t.Fatalf("a reply 3h later counts as leaving: %+v", got)
	}
	// A reply 3h later does not undo the leaving.
	save(other, 6, "")
	if got, _ := db.UnjudgedReplies(ctx, start.Add(-time.Minute), clk.Now().Add(-time.Hour), time.Hour, 10); len(got) != 2 {
		t.Fatalf("a reply 3h later: %+v", got)
	}
	// Outside the window: none.
	if got, _ := db.UnjudgedReplies(ctx, clk.Now().Add(-time.Hour), clk.Now(), time.Hour, 10); len(got) != 0 {
		t.Fatalf("outside the window: %+v", got)
	}
}
