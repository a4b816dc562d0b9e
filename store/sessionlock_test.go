package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestConcurrentSessionTouchesDoNotAbort: on PostgreSQL many
// conversations' sessions are created and touched at once (every
// message of a conversation idle for a while touches its session). Each
// transaction locks its own conversation's row; none is aborted and run
// again, as SERIALIZABLE's predicate locks on the index pages did (with
// two replicas at 200 messages a second a request failed on it).
func TestConcurrentSessionTouchesDoNotAbort(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	db := openPG(t, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	ctx := context.Background()
	const convs, rounds = 40, 3
	before := db.Trips()
	for round := range rounds {
		// Each round is past the touch interval: every call writes.
		clock.Add((2 * time.Minute).Milliseconds())
		var wg sync.WaitGroup
		for i := range convs {
			wg.Go(func() {
				c := core.ConversationKey{Channel: "telegram", Chat: fmt.Sprint(i)}
				s, err := db.ActiveSession(ctx, c)
				if err != nil || s.ID == 0 || s.Conversation != c {
					t.Errorf("round %d: session of %s = %+v, %v", round, c, s, err)
				}
			})
		}
		wg.Wait()
	}
	got := db.Trips().Sub(before)
	// Each call: its read of the session, then one write transaction.
	if got.Writes != convs*rounds {
		t.Errorf("%d session creations and touches took %d write transactions; want one each (none aborted and run again)", convs*rounds, got.Writes)
	}
	var active int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE active`).Scan(&active); err != nil || active != convs {
		t.Errorf("%d active sessions (%v); want %d, one per conversation", active, err, convs)
	}
}

// TestSessionRacesInOneConversation: on PostgreSQL a touch or a /new
// that meets another transaction's work on the same conversation's
// session waits for it and then builds on it: the session another
// created meanwhile is the one touched (no second active session), /new
// ends it and carries its pins, and /new waits for a touch in flight
// instead of being aborted and run again.
func TestSessionRacesInOneConversation(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	db := openPG(t, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	ctx := context.Background()
	c := core.ConversationKey{Channel: "telegram", Chat: "race"}
	active := func() []int64 {
		t.Helper()
		rows, err := db.r.QueryContext(ctx, `SELECT id FROM sessions WHERE conversation = $1 AND active`, c.String())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	// holdInsert starts a session of c with a pin in a transaction left
	// open; commit ends it.
	holdInsert := func(pin string) (id int64, commit func()) {
		t.Helper()
		tx, err := db.w.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := clock.Load()
		// As another /new would: the active session ended first.
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET active = FALSE WHERE conversation = $1 AND active`, c.String()); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO sessions (conversation, created_at, last_access, model_pin) VALUES ($1, $2, $2, $3) RETURNING id`,
			c.String(), now, pin).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id, func() {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// during runs f beside an open transaction, which it commits once f
	// waits for it (or f has ended without waiting).
	during := func(commit func(), f func()) {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		waitLockWaiters(t, db, 1, done)
		commit()
		<-done
	}

	// A touch meets a session being created: it touches that one.
	other, commit := holdInsert("fake/big")
	var touched core.Session
	during(commit, func() {
		var err error
		if touched, err = db.ActiveSession(ctx, c); err != nil {
			t.Errorf("session: %v", err)
		}
	})
	if ids := active(); touched.ID != other || len(ids) != 1 || ids[0] != other {
		t.Fatalf("the touch got session %d, active %v; want the other's %d alone", touched.ID, ids, other)
	}

	// /new meets a touch in flight: it waits, then ends the session
	// (one transaction, not aborted), carrying its pin.
	clock.Add((2 * time.Minute).Milliseconds())
	hold, err := db.w.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.ExecContext(ctx, `UPDATE sessions SET last_access = $1 WHERE id = $2`, clock.Load(), other); err != nil {
		t.Fatal(err)
	}
	before := db.Trips()
	var fresh core.Session
	during(func() {
		if err := hold.Commit(); err != nil {
			t.Fatal(err)
		}
	}, func() {
		if fresh, err = db.NewSession(ctx, c); err != nil {
			t.Errorf("/new: %v", err)
		}
	})
	if got := db.Trips().Sub(before).Writes; got != 1 {
		t.Errorf("/new beside a touch took %d write transactions; want one (it waits, it is not aborted)", got)
	}
	if ids := active(); fresh.ID == other || len(ids) != 1 || ids[0] != fresh.ID || fresh.ModelPin != "fake/big" {
		t.Fatalf("/new gave %+v, active %v; want a new session alone, with the pin fake/big", fresh, ids)
	}

	// /new meets a session being created: it ends that one too.
	third, commit := holdInsert("fake/small")
	var newer core.Session
	during(commit, func() {
		var err error
		if newer, err = db.NewSession(ctx, c); err != nil {
			t.Errorf("/new: %v", err)
		}
	})
	if ids := active(); newer.ID == third || newer.ID == fresh.ID || len(ids) != 1 || ids[0] != newer.ID || newer.ModelPin != "fake/small" {
		t.Fatalf("/new gave %+v, active %v; want a new session alone, with the other's pin fake/small", newer, ids)
	}
}
