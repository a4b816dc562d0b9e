package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/storetest"
)

// TestLearningStateOnEveryEngine: the router's learning state (migration
// 100) round-trips on SQLite and PostgreSQL alike, goes with an affinity
// reset, and the queries of the exploration ledger and the abandonment
// sweep run on both.
func TestLearningStateOnEveryEngine(t *testing.T) {
	for _, e := range []storetest.Engine{sqliteEngine, postgresEngine} {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			db := e.New(t)(store.Options{})
			at := time.UnixMilli(1_770_000_000_000).UTC()
			arm := core.RouterArm{Task: "code", Model: "p/coder", Drop: core.RouterRun{LLR: 4.5, Ref: 0.62, Pos: 3, Neg: 7.5},
				Seq: core.RouterSeq{Active: true, P0: 0.4, P1: 0.8, LLR: 1.2, N: 4, Seen: 3}, SettledVs: "p/mid", SettledAt: at,
				ChangeDir: -1, ChangeScope: "model", UpdatedAt: at}
			task := core.RouterTask{Task: "code", ProbeTokens: -2.5, ProbeCost: 0.75, Choices: 412.5, ChoicesAt: at, FirstSeen: at, Incumbent: "p/mid", UpdatedAt: at}
			sig := core.Signal{Kind: core.SignalRetry, Polarity: core.Negative, Model: "p/coder", TaskType: "code", Weight: 1, At: at, RequestID: 11}
			inc := func(a core.Affinity) core.Affinity {
				a.Neg++
				a.Negatives++
				a.LastSignal, a.UpdatedAt = at, at
				return a
			}
			if id, err := db.AddSignalAndLearn(ctx, sig, "code", "p/coder", inc, []core.RouterArm{arm}, []core.RouterTask{task}); err != nil || id == 0 {
				t.Fatalf("AddSignalAndLearn = %d, %v", id, err)
			}
			if id, err := db.AddSignalAndLearn(ctx, sig, "code", "p/coder", inc, nil, nil); err != nil || id != 0 {
				t.Fatalf("the same request's signal again = %d, %v; want 0", id, err)
			}
			arms, tasks, err := db.LearningState(ctx)
			if err != nil || len(arms) != 1 || !reflect.DeepEqual(arms[0], arm) || len(tasks) != 1 || !reflect.DeepEqual(tasks[0], task) {
				t.Fatalf("LearningState = %+v %+v %v\nwant %+v %+v", arms, tasks, err, arm, task)
			}
			if _, err := db.ExploreSpentSince(ctx, at.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := db.UnjudgedReplies(ctx, at.Add(-time.Hour), at, time.Hour, 10); err != nil {
				t.Fatal(err)
			}
			if n, err := db.ResetAffinity(ctx, "code", ""); err != nil || n != 1 {
				t.Fatalf("ResetAffinity = %d, %v", n, err)
			}
			if arms, tasks, _ := db.LearningState(ctx); len(arms) != 0 || len(tasks) != 0 {
				t.Fatalf("learning state left after the affinity reset: %+v %+v", arms, tasks)
			}
		})
	}
}
