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
