package storetest

import (
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testQueueView checks what `opentalon queue` reads: the listing by
// status, conversation and time, its order, the counts, one item in
// full, and a row whose event cannot be read listed as such.
func testQueueView(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, Holder: "replica-a", LeaseTTL: 30 * time.Second})
	a, b, c := conv("view-a"), conv("view-b"), conv("view-c")
	a1 := mustEnqueue(t, db, msg(a, "1", "a1"))
	a2 := mustEnqueue(t, db, msg(a, "2", "a2"))
	b1 := mustEnqueue(t, db, msg(b, "1", "b1"))
	// A message row without its message: its event cannot be read.
	bad := mustEnqueue(t, db, core.QueueItem{Kind: core.EventMessage, Conversation: c, DedupeKey: "telegram:view-c:m:1"})

	list := func(q store.QueueQuery) []store.QueueEntry {
		t.Helper()
		es, err := db.QueueEntries(ctx, q)
		if err != nil {
			t.Fatalf("queue entries %+v: %v", q, err)
		}
		return es
	}
	ids := func(es []store.QueueEntry) []int64 {
		out := []int64{}
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	same := func(what string, got []store.QueueEntry, want ...int64) {
		t.Helper()
		g := ids(got)
		if len(g) != len(want) {
			t.Fatalf("%s = %v; want %v", what, g, want)
		}
		for i := range g {
			if g[i] != want[i] {
				t.Fatalf("%s = %v; want %v", what, g, want)
			}
		}
	}

	queued := list(store.QueueQuery{Statuses: []string{core.StatusQueued}})
	same("queued, oldest first", queued, a1, a2, b1, bad)
	if m := queued[0].Message; m == nil || m.Text != "a1" || m.UserID != "u1" || queued[0].PayloadError != "" {
		t.Fatalf("a1 = %+v; want its message read", queued[0])
	}
	if e := queued[3]; e.PayloadError == "" || e.Message != nil || e.Kind != core.EventMessage || e.Conversation != c {
		t.Fatalf("the unreadable row = %+v; want it listed with why its event cannot be read", e)
	}
	if e := queued[0]; e.Status != core.StatusQueued || e.Holder != "" || !e.LeaseUntil.IsZero() || !e.NotBefore.IsZero() ||
		!e.CreatedAt.Equal(clock.Now()) || e.Conversation != a || e.Kind != core.EventMessage {
		t.Fatalf("a queued row = %+v", e)
	}
	same("limit 2", list(store.QueueQuery{Statuses: []string{core.StatusQueued}, Limit: 2}), a1, a2)
	same("conversation a", list(store.QueueQuery{Conversation: a.String()}), a1, a2)

	// a1 and b1 run; b1 fails; later b2 fails too.
	started := clock.Now()
	for _, it := range claim(t, db, 10, started) {
		if it.ID == b1 {
			check(t, "fail b1", db.Finish(ctx, it.ID, it.Lease, core.StatusFailed, "provider said 500"))
		}
	}
	clock.Advance(2 * time.Hour)
	b2 := mustEnqueue(t, db, msg(b, "2", "b2"))
	for _, it := range claim(t, db, 10, clock.Now()) {
		if it.ID == b2 {
			check(t, "fail b2", db.Finish(ctx, it.ID, it.Lease, core.StatusFailed, "late"))
		}
	}

	running := list(store.QueueQuery{Statuses: []string{core.StatusRunning}})
	same("running", running, a1)
	// a1's lease ran out in the two hours: the second claim took it back.
	if e := running[0]; e.Holder != "replica-a" || !e.LeaseUntil.Equal(clock.Now().Add(30*time.Second)) || e.Interruptions != 1 {
		t.Fatalf("the running row = %+v; want its holder, lease end and the interruption", e)
	}
	failed := list(store.QueueQuery{Statuses: []string{core.StatusFailed}, NewestFirst: true})
	if len(failed) == 0 || failed[0].ID != b2 || failed[0].LastError != "late" || failed[0].Attempts != 1 {
		t.Fatalf("failed, newest first = %v (%+v); want b2 first with its error", ids(failed), failed)
	}
	same("failed, newest first, limit 1", list(store.QueueQuery{Statuses: []string{core.StatusFailed}, NewestFirst: true, Limit: 1}), b2)
	same("failed within the hour", list(store.QueueQuery{Statuses: []string{core.StatusFailed}, Since: clock.Now().Add(-time.Hour)}), b2)
	same("unfinished", list(store.QueueQuery{Statuses: []string{core.StatusQueued, core.StatusRunning}}), a1, a2)

	tally, err := db.QueueTally(ctx, "", clock.Now().Add(-time.Hour))
	if err != nil || tally.ByStatus[core.StatusQueued] != 1 || tally.ByStatus[core.StatusRunning] != 1 || tally.FailedSince != 1 {
		t.Fatalf("tally = %+v, %v; want 1 queued, 1 running, 1 failed within the hour", tally, err)
	}
	all := tally.ByStatus[core.StatusFailed] + tally.ByStatus[core.StatusDone]
	if all != 3 {
		t.Fatalf("tally = %+v; want b1, b2 and the unreadable row finished", tally)
	}
	tally, err = db.QueueTally(ctx, b.String(), time.Time{})
	if err != nil || tally.ByStatus[core.StatusFailed] != 2 || len(tally.ByStatus) != 1 || tally.FailedSince != 2 {
		t.Fatalf("tally of b = %+v, %v; want its 2 failures", tally, err)
	}

	e1, ok, err := db.QueueEntry(ctx, b1)
	if err != nil || !ok || e1.Status != core.StatusFailed || e1.LastError != "provider said 500" || e1.Message == nil || e1.Message.Text != "b1" ||
		e1.DedupeKey != "telegram:view-b:m:1" || e1.Holder != "" || !e1.LeaseUntil.IsZero() {
		t.Fatalf("entry b1 = %+v, %v, %v", e1, ok, err)
	}
	eb, ok, err := db.QueueEntry(ctx, bad)
	if err != nil || !ok || eb.PayloadError == "" {
		t.Fatalf("the unreadable entry = %+v, %v, %v; want it with why", eb, ok, err)
	}
	if _, ok, err := db.QueueEntry(ctx, bad+1000); ok || err != nil {
		t.Fatalf("an id that is not there: ok %v, %v", ok, err)
	}
}
