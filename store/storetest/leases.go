package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

func testLeases(t *testing.T, e Engine) {
	const ttl = 10 * time.Second
	t.Run("FencingAfterTakeBack", func(t *testing.T) {
		clock := NewClock()
		handle := e.New(t)
		a := handle(store.Options{Now: clock.Now, LeaseTTL: ttl, Holder: "replica-a"})
		b := handle(store.Options{Now: clock.Now, LeaseTTL: ttl, Holder: "replica-b"})
		id := mustEnqueue(t, a, msg(conv("fence"), "1", "x"))
		held := claim(t, a, 1, clock.Now())[0]
		if items, next, err := b.Claim(ctx, 5, clock.Now()); err != nil || len(items) != 0 || !next.Equal(clock.Now().Add(ttl)) {
			t.Fatalf("another claimer while the lease runs: %s, next %v (want the lease end %v), %v", texts(items), next, clock.Now().Add(ttl), err)
		}
		clock.Advance(ttl + time.Second)
		taken := claim(t, b, 5, clock.Now())
		if len(taken) != 1 || taken[0].ID != id || taken[0].Interruptions != 1 || taken[0].Lease == held.Lease {
			t.Fatalf("after the lease ran out: %+v; want the item taken back as an interruption under a new lease", taken)
		}
		// The first claimer lost its lease: nothing it does changes the item.
		for what, err := range map[string]error{
			"renew":   a.Renew(ctx, id, held.Lease),
			"finish":  a.Finish(ctx, id, held.Lease, core.StatusDone, "stale"),
			"retry":   a.Retry(ctx, id, held.Lease, clock.Now(), "stale"),
			"defer":   a.Defer(ctx, id, held.Lease, clock.Now(), "stale", true),
			"release": a.Release(ctx, id, held.Lease),
			"mark":    a.MarkWaiting(ctx, id, held.Lease, true),
		} {
			if !errors.Is(err, core.ErrLeaseLost) {
				t.Errorf("%s under the lost lease: %v; want ErrLeaseLost", what, err)
			}
		}
		it, status, err := b.QueueItem(ctx, id)
		if err != nil || status != core.StatusRunning || it.Attempts != 0 || it.Notified {
			t.Fatalf("after the fenced calls: status %s attempts %d notified %v, %v; want running and untouched", status, it.Attempts, it.Notified, err)
		}
		// The same token on the other handle is not the holder either.
		if err := a.Finish(ctx, id, taken[0].Lease, core.StatusDone, ""); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("another holder finishing with the new token: %v; want ErrLeaseLost", err)
		}
		check(t, "finish by the holder", b.Finish(ctx, id, taken[0].Lease, core.StatusDone, ""))
		if _, status, _ := b.QueueItem(ctx, id); status != core.StatusDone {
			t.Fatalf("status %s, want done", status)
		}
		if err := b.Finish(ctx, id, taken[0].Lease, core.StatusDone, ""); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("finishing twice: %v; want ErrLeaseLost", err)
		}
	})

	t.Run("StaleTokenOfTheSameHolder", func(t *testing.T) {
		// A worker of a replica hangs past its lease; the same replica
		// claims the item again. The hung worker's token is stale.
		clock := NewClock()
		q := e.open(t, store.Options{Now: clock.Now, LeaseTTL: ttl})
		mustEnqueue(t, q, msg(conv("stale"), "1", "x"))
		hung := claim(t, q, 1, clock.Now())[0]
		clock.Advance(ttl)
		again := claim(t, q, 1, clock.Now())
		if len(again) != 1 || again[0].ID != hung.ID || again[0].Lease == hung.Lease {
			t.Fatalf("reclaimed = %+v", again)
		}
		if err := q.Finish(ctx, hung.ID, hung.Lease, core.StatusFailed, "stale"); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("finish with the stale token: %v; want ErrLeaseLost", err)
		}
		if err := q.Renew(ctx, hung.ID, hung.Lease); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("renew with the stale token: %v; want ErrLeaseLost", err)
		}
		// The worker was not hung but cut off from the database, and the
		// claim handed it the new lease: the interruption the claim
		// counted is taken back, under the new token only.
		if again[0].Interruptions != 1 {
			t.Fatalf("the claim that took the item back counted %d interruptions; want 1", again[0].Interruptions)
		}
		if err := q.NotInterrupted(ctx, hung.ID, hung.Lease); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("take back the interruption with the stale token: %v; want ErrLeaseLost", err)
		}
		check(t, "take back the interruption", q.NotInterrupted(ctx, again[0].ID, again[0].Lease))
		if it, _, err := q.QueueItem(ctx, hung.ID); err != nil || it.Interruptions != 0 {
			t.Fatalf("after taking back the interruption: %d, %v; want 0", it.Interruptions, err)
		}
		check(t, "finish", q.Finish(ctx, again[0].ID, again[0].Lease, core.StatusDone, ""))
	})

	t.Run("RenewKeepsTheItem", func(t *testing.T) {
		clock := NewClock()
		handle := e.New(t)
		a := handle(store.Options{Now: clock.Now, LeaseTTL: ttl})
		b := handle(store.Options{Now: clock.Now, LeaseTTL: ttl})
		mustEnqueue(t, a, msg(conv("renew"), "1", "x"))
		held := claim(t, a, 1, clock.Now())[0]
		for range 3 {
			clock.Advance(ttl * 8 / 10)
			check(t, "renew", a.Renew(ctx, held.ID, held.Lease))
			if got := claim(t, b, 5, clock.Now()); len(got) != 0 {
				t.Fatalf("a renewed lease was taken back: %+v", got)
			}
		}
		clock.Advance(ttl + time.Millisecond)
		if got := claim(t, b, 5, clock.Now()); len(got) != 1 || got[0].Interruptions != 1 {
			t.Fatalf("a lease not renewed for its TTL: %+v; want it taken back", got)
		}
	})

	t.Run("InterruptionsCount", func(t *testing.T) {
		clock := NewClock()
		q := e.open(t, store.Options{Now: clock.Now, LeaseTTL: ttl})
		id := mustEnqueue(t, q, msg(conv("poison"), "1", "crashes the worker"))
		for want := 0; want < 4; want++ {
			it := claim(t, q, 1, clock.Now())
			if len(it) != 1 || it[0].Interruptions != want {
				t.Fatalf("claim %d: %+v; want interruptions %d", want, it, want)
			}
			clock.Advance(ttl)
		}
		_, _, lastErr, err := q.QueueStatus(ctx, id)
		if err != nil || lastErr == "" {
			t.Fatalf("last error %q (%v); want why it was taken back", lastErr, err)
		}
	})

	t.Run("WaitingIsNoInterruption", func(t *testing.T) {
		// A claimed item that only waits (for a busy local model's slot)
		// when its process dies is taken back without an interruption:
		// the poison-message guard is for what ran. One that waited and
		// went on counts as before, and every claim clears the mark.
		clock := NewClock()
		handle := e.New(t)
		a := handle(store.Options{Now: clock.Now, LeaseTTL: ttl, Holder: "replica-a"})
		b := handle(store.Options{Now: clock.Now, LeaseTTL: ttl, Holder: "replica-b"})
		id := mustEnqueue(t, a, msg(conv("waiting"), "1", "behind a busy local model"))
		held := claim(t, a, 1, clock.Now())[0]
		check(t, "mark waiting", a.MarkWaiting(ctx, id, held.Lease, true))
		clock.Advance(ttl)
		it := claim(t, b, 1, clock.Now())
		if len(it) != 1 || it[0].ID != id || it[0].Interruptions != 0 {
			t.Fatalf("taken back while it waited: %+v; want it with no interruption", it)
		}
		if err := a.MarkWaiting(ctx, id, held.Lease, false); !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("the old claim marking it: %v; want ErrLeaseLost", err)
		}
		clock.Advance(ttl)
		if it = claim(t, b, 1, clock.Now()); len(it) != 1 || it[0].Interruptions != 1 {
			t.Fatalf("taken back after a claim that did not wait: %+v; want interruptions 1 (the claim clears the mark)", it)
		}
		check(t, "mark waiting", b.MarkWaiting(ctx, id, it[0].Lease, true))
		check(t, "mark going on", b.MarkWaiting(ctx, id, it[0].Lease, false))
		clock.Advance(ttl)
		if it = claim(t, b, 1, clock.Now()); len(it) != 1 || it[0].Interruptions != 2 {
			t.Fatalf("taken back after it waited and went on: %+v; want interruptions 2", it)
		}
	})

	t.Run("InterruptionsStartOverAfterATryThatEnded", func(t *testing.T) {
		// Killed twice, then a try that ended normally (the provider
		// asked to wait), then killed again: one interruption in a row,
		// not three, so the give-up for a message that crashes the
		// process is not reached by kills between normal tries.
		clock := NewClock()
		q := e.open(t, store.Options{Now: clock.Now, LeaseTTL: ttl})
		mustEnqueue(t, q, msg(conv("crashloop"), "1", "an ordinary message"))
		claim(t, q, 1, clock.Now())
		clock.Advance(ttl)
		claim(t, q, 1, clock.Now())
		clock.Advance(ttl)
		it := claim(t, q, 1, clock.Now())
		if len(it) != 1 || it[0].Interruptions != 2 {
			t.Fatalf("third claim: %+v; want interruptions 2", it)
		}
		check(t, "defer", q.Defer(ctx, it[0].ID, it[0].Lease, clock.Now(), "the provider asked to wait", false))
		it = claim(t, q, 1, clock.Now())
		if len(it) != 1 || it[0].Interruptions != 0 {
			t.Fatalf("claim after the deferral: %+v; want interruptions 0", it)
		}
		clock.Advance(ttl)
		if it = claim(t, q, 1, clock.Now()); len(it) != 1 || it[0].Interruptions != 1 {
			t.Fatalf("claim after one more kill: %+v; want interruptions 1", it)
		}
	})

	t.Run("SoleClaimerTakesBackAtStart", func(t *testing.T) {
		clock := NewClock()
		handle := e.New(t)
		crashed := handle(store.Options{Now: clock.Now}) // leases that never end
		id := mustEnqueue(t, crashed, msg(conv("sole"), "1", "x"))
		mustEnqueue(t, crashed, msg(conv("sole"), "2", "y"))
		claim(t, crashed, 1, clock.Now())
		restarted := handle(store.Options{Now: clock.Now, SoleClaimer: true})
		got := claim(t, restarted, 5, clock.Now())
		if len(got) != 1 || got[0].ID != id || got[0].Interruptions != 1 {
			t.Fatalf("a sole claimer's first claim: %+v; want the crashed process's item back at once, as an interruption", got)
		}
	})

	t.Run("OrderAcrossClaimers", func(t *testing.T) {
		clock := NewClock()
		handle := e.New(t)
		a := handle(store.Options{Now: clock.Now, LeaseTTL: ttl})
		b := handle(store.Options{Now: clock.Now, LeaseTTL: ttl})
		c := conv("across")
		for i, text := range []string{"1", "2", "3", "4"} {
			q := a
			if i%2 == 1 {
				q = b
			}
			mustEnqueue(t, q, msg(c, text, text))
		}
		var order []string
		for turn := 0; turn < 8 && len(order) < 4; turn++ {
			claimer, other := a, b
			if turn%2 == 1 {
				claimer, other = b, a
			}
			items := claim(t, claimer, 5, clock.Now())
			if len(items) != 1 {
				t.Fatalf("turn %d: %d items; want the conversation's head only", turn, len(items))
			}
			if got := claim(t, other, 5, clock.Now()); len(got) != 0 {
				t.Fatalf("turn %d: the other claimer got %s while the head runs", turn, texts(got))
			}
			order = append(order, items[0].Message.Text)
			check(t, "finish", claimer.Finish(ctx, items[0].ID, items[0].Lease, core.StatusDone, ""))
		}
		if got := joinStrings(order); got != "1,2,3,4" {
			t.Fatalf("order = %s; want 1,2,3,4", got)
		}
	})
}

func joinStrings(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
