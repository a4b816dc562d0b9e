package store

import (
	"context"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// TestStoppedBefore: /stop reads back whether the item before it, in its
// conversation, was ended by a stop — on both engines.
func TestStoppedBefore(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			db := openTest(t, Options{})
			if engine == "postgres" {
				db = openPG(t, Options{})
			}
			ctx := context.Background()
			conv := core.ConversationKey{Channel: "telegram", Chat: "1", Thread: "7"}
			other := core.ConversationKey{Channel: "telegram", Chat: "2"}
			finish := func(cause string) {
				t.Helper()
				items, _, err := db.Claim(ctx, 1, time.Now())
				if err != nil || len(items) != 1 {
					t.Fatalf("claim = %v, %v; want one item", items, err)
				}
				if err := db.Finish(ctx, items[0].ID, items[0].Lease, core.StatusDone, cause); err != nil {
					t.Fatal(err)
				}
			}
			enqueue := func(c core.ConversationKey, id string) int64 {
				t.Helper()
				n, _, err := db.Enqueue(ctx, msgItem(c, id, "x"))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			enqueue(conv, "1")
			finish(core.StopCause)
			enqueue(other, "2")
			finish("") // another conversation's item between them
			stop := enqueue(conv, "3")
			if got, err := db.StoppedBefore(ctx, conv, stop); err != nil || !got {
				t.Fatalf("StoppedBefore = %v, %v; want true (the item before was stopped)", got, err)
			}
			finish("")
			again := enqueue(conv, "4")
			if got, err := db.StoppedBefore(ctx, conv, again); err != nil || got {
				t.Fatalf("StoppedBefore = %v, %v; want false (the item before ended normally)", got, err)
			}
			if got, err := db.StoppedBefore(ctx, core.ConversationKey{Channel: "telegram", Chat: "new"}, again); err != nil || got {
				t.Fatalf("StoppedBefore of a new conversation = %v, %v; want false", got, err)
			}
		})
	}
}

// TestPostgresStopReachesTheOtherReplica: a stop requested through one
// replica's database reaches the other's listener, naming the
// conversation; on SQLite there is no one else to tell.
func TestPostgresStopReachesTheOtherReplica(t *testing.T) {
	ctx := context.Background()
	a, b := listeningReplicas(t)
	stops := a.StopRequests()
	if stops == nil {
		t.Fatal("no stop channel on PostgreSQL")
	}
	// a's own request comes first: a stopped its work before asking, and
	// by the time its notification came back the next message's work may
	// have begun, which that stop is not for. Only b's reaches a.
	if err := a.RequestStop(ctx, core.ConversationKey{Channel: "slack", Chat: "C1"}); err != nil {
		t.Fatal(err)
	}
	conv := core.ConversationKey{Channel: "slack", Chat: "C1", Thread: "1700000000.000100"}
	if err := b.RequestStop(ctx, conv); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-stops:
		if got != conv {
			t.Fatalf("stop of %v; want %v (the other replica's, not its own)", got, conv)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the stop did not reach the other replica")
	}
	lite := openTest(t, Options{})
	if lite.StopRequests() != nil {
		t.Fatal("a stop channel on SQLite")
	}
	if err := lite.RequestStop(ctx, conv); err != nil {
		t.Fatalf("RequestStop on SQLite: %v", err)
	}
}

// TestStoppedBeforeLooksPastWhatCameBetween: the item /stop stopped need
// not be the last before it — a message sent after it (or a reaction, a
// firing) is answered between the stop and /stop's turn; an item an
// earlier /stop stopped, ended before this one was queued, is not this
// one's. On both engines.
func TestStoppedBeforeLooksPastWhatCameBetween(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			o := Options{Now: clk.Now}
			db := openTest(t, o)
			if engine == "postgres" {
				db = openPG(t, o)
			}
			ctx := context.Background()
			conv := core.ConversationKey{Channel: "slack", Chat: "C1"}
			enqueue := func(id string) int64 {
				t.Helper()
				it := msgItem(conv, id, "x")
				it.CreatedAt = clk.Now()
				n, _, err := db.Enqueue(ctx, it)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			finish := func(cause string) {
				t.Helper()
				items, _, err := db.Claim(ctx, 1, clk.Now())
				if err != nil || len(items) != 1 {
					t.Fatalf("claim = %v, %v; want one item", items, err)
				}
				if err := db.Finish(ctx, items[0].ID, items[0].Lease, core.StatusDone, cause); err != nil {
					t.Fatal(err)
				}
			}
			// The story, a message sent while it streams, then /stop: the
			// story is stopped, the message answered, then /stop's turn.
			enqueue("story")
			enqueue("meanwhile")
			stop := enqueue("/stop")
			clk.Advance(time.Second)
			finish(core.StopCause)
			finish("")
			if got, err := db.StoppedBefore(ctx, conv, stop); err != nil || !got {
				t.Fatalf("StoppedBefore = %v, %v; want true (the story, before the message answered since)", got, err)
			}
			finish("") // /stop itself
			clk.Advance(time.Second)
			enqueue("next")
			clk.Advance(time.Second)
			finish("")
			again := enqueue("/stop again")
			if got, err := db.StoppedBefore(ctx, conv, again); err != nil || got {
				t.Fatalf("StoppedBefore = %v, %v; want false (the story was the first /stop's)", got, err)
			}
		})
	}
}
