package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestConcurrentEnqueuesShareATransaction: enqueues that come while
// another is being written go in together, in one write transaction,
// each with its own outcome: the first of a conversation is claimed, the
// second of it only queued behind it, a duplicate is reported as one.
func TestConcurrentEnqueuesShareATransaction(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{SoleClaimer: true, Holder: "me", LeaseTTL: time.Minute})
	a := core.ConversationKey{Channel: "telegram", Chat: "a"}
	b := core.ConversationKey{Channel: "telegram", Chat: "b"}
	c := core.ConversationKey{Channel: "telegram", Chat: "c"}
	if _, _, err := db.EnqueueClaim(ctx, msgItem(c, "0", "c first"), time.Now(), func(core.QueueItem) {}); err != nil {
		t.Fatal(err)
	}

	// Another group is being written: the enqueues below queue.
	g := &db.inserts
	g.mu.Lock()
	g.writing = true
	g.mu.Unlock()
	items := []core.QueueItem{
		msgItem(a, "1", "a one"),
		msgItem(b, "2", "b one"),
		msgItem(c, "0", "c again"), // a duplicate
	}
	type outcome struct{ claimed, dup bool }
	got := make([]outcome, len(items))
	var wg sync.WaitGroup
	enqueue := func(i int) {
		claimed, dup, err := db.EnqueueClaim(ctx, items[i], time.Now(), func(core.QueueItem) {})
		if err != nil {
			t.Errorf("enqueue %d: %v", i, err)
		}
		got[i] = outcome{claimed, dup}
	}
	for i := range items {
		wg.Go(func() { enqueue(i) })
		waitWaiting(t, g, i+1)
	}
	// The second of conversation a queues last, behind its first.
	items = append(items, msgItem(a, "3", "a two"))
	got = append(got, outcome{})
	wg.Go(func() { enqueue(3) })
	waitWaiting(t, g, 4)

	before := db.Trips()
	// The group being written ends: the first queued writes them all.
	g.mu.Lock()
	next := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	next[0].batch = next
	close(next[0].done)
	wg.Wait()

	if d := db.Trips().Sub(before); d.Writes != 1 {
		t.Errorf("%d write transactions for the four queued enqueues; want 1", d.Writes)
	}
	want := []outcome{{claimed: true}, {claimed: true}, {dup: true}, {}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("enqueue %d (%s): claimed %v dup %v; want claimed %v dup %v",
				i, items[i].DedupeKey, got[i].claimed, got[i].dup, want[i].claimed, want[i].dup)
		}
	}
	counts, err := db.QueueCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts["running"] != 3 || counts["queued"] != 1 {
		t.Errorf("queue %v; want 3 running (c, a, b) and 1 queued (a's second)", counts)
	}
	// The group is over: a lone enqueue writes at once.
	if _, dup, err := db.EnqueueClaim(ctx, msgItem(b, "4", "b two"), time.Now(), func(core.QueueItem) {}); err != nil || dup {
		t.Fatalf("lone enqueue after the group: dup %v, %v", dup, err)
	}
}

// waitWaiting waits until n enqueues are queued in g.
func waitWaiting(t *testing.T, g *insertGroup, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		got := len(g.waiting)
		g.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d enqueues queued; want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitingEnqueueGivesUpOnItsContext: an enqueue waiting for the group
// being written returns when its context ends, and is not written later.
func TestWaitingEnqueueGivesUpOnItsContext(t *testing.T) {
	db := openTest(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "a"}
	g := &db.inserts
	g.mu.Lock()
	g.writing = true
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := db.Enqueue(ctx, msgItem(conv, "1", "given up"))
		errc <- err
	}()
	waitWaiting(t, g, 1)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("enqueue whose context ended while it waited: %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an enqueue waiting for a group did not return when its context ended")
	}
	g.mu.Lock()
	left := len(g.waiting)
	g.writing = false
	g.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d inserts still waiting; want the given-up one gone", left)
	}
	counts, err := db.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if counts["queued"]+counts["running"] != 0 {
		t.Fatalf("queue %v; want nothing written", counts)
	}
}
