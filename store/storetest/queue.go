package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

func testQueue(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	var q core.QueueStore = db
	now := clock.Now

	t.Run("OneAtATimeInOrder", func(t *testing.T) {
		a, b := conv("order-a"), conv("order-b")
		mustEnqueue(t, q, msg(a, "1", "a1"))
		mustEnqueue(t, q, msg(a, "2", "a2"))
		mustEnqueue(t, q, msg(b, "1", "b1"))
		first := claim(t, q, 10, now())
		if texts(first) != "a1,b1" {
			t.Fatalf("first claim = %s; want the head of each conversation, oldest first: a1,b1", texts(first))
		}
		if got := claim(t, q, 10, now()); len(got) != 0 {
			t.Fatalf("a second claim while both heads run = %s; want nothing", texts(got))
		}
		check(t, "finish a1", q.Finish(ctx, first[0].ID, first[0].Lease, core.StatusDone, ""))
		next := claim(t, q, 10, now())
		if texts(next) != "a2" {
			t.Fatalf("after a1 finished: %s; want a2", texts(next))
		}
		check(t, "finish b1", q.Finish(ctx, first[1].ID, first[1].Lease, core.StatusDone, ""))
		check(t, "finish a2", q.Finish(ctx, next[0].ID, next[0].Lease, core.StatusDone, ""))
		items, nx, err := q.Claim(ctx, 10, now())
		if err != nil || len(items) != 0 || !nx.IsZero() {
			t.Fatalf("empty queue: %s, next %v, %v", texts(items), nx, err)
		}
	})

	t.Run("CausesAreStorable", func(t *testing.T) {
		// An error's text may hold a NUL byte or broken UTF-8 (a
		// plugin's, a provider's body): PostgreSQL refuses both in a
		// text column, and a finish it refused would leave the item
		// running, taken back and tried again for good.
		bad := "plugin said \x00no\xff"
		want := "plugin said no\uFFFD"
		c := conv("causes")
		ids := []int64{mustEnqueue(t, q, msg(c, "1", "a")), mustEnqueue(t, q, msg(c, "2", "b")), mustEnqueue(t, q, msg(c, "3", "c"))}
		it := claim(t, q, 1, now())[0]
		check(t, "defer", q.Defer(ctx, it.ID, it.Lease, now(), bad, false))
		it = claim(t, q, 1, now())[0]
		check(t, "retry", q.Retry(ctx, it.ID, it.Lease, now(), bad))
		it = claim(t, q, 1, now())[0]
		check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusFailed, bad))
		if status, _, cause, err := db.QueueStatus(ctx, ids[0]); err != nil || status != core.StatusFailed || cause != want {
			t.Fatalf("the failed item: %s %q %v; want failed, %q", status, cause, err, want)
		}
		for _, id := range ids[1:] {
			it := claim(t, q, 1, now())[0]
			if it.ID != id {
				t.Fatalf("claimed %d; want %d next", it.ID, id)
			}
			check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
		}
	})

	t.Run("Dedupe", func(t *testing.T) {
		c := conv("dedupe")
		id := mustEnqueue(t, q, msg(c, "1", "hi"))
		if id2, dup, err := q.Enqueue(ctx, msg(c, "1", "hi again")); err != nil || !dup || id2 != 0 {
			t.Fatalf("the same platform message again: id %d dup %v %v; want dup", id2, dup, err)
		}
		it := claim(t, q, 1, now())
		check(t, "finish", q.Finish(ctx, it[0].ID, it[0].Lease, core.StatusDone, ""))
		if _, dup, err := q.Enqueue(ctx, msg(c, "1", "redelivered")); err != nil || !dup {
			t.Fatalf("a redelivery after the answer: dup %v %v; want dup", dup, err)
		}
		if it[0].ID != id || it[0].Message.Text != "hi" {
			t.Fatalf("claimed %+v", it[0])
		}
	})

	t.Run("PendingCap", func(t *testing.T) {
		c, other := conv("cap"), conv("cap-other")
		capped := func(id string) core.QueueItem { it := msg(c, id, id); it.MaxPending = 2; return it }
		mustEnqueue(t, q, capped("1"))
		mustEnqueue(t, q, capped("2"))
		if _, _, err := q.Enqueue(ctx, capped("3")); !errors.Is(err, core.ErrConversationFull) {
			t.Fatalf("a third message while two wait: %v; want ErrConversationFull", err)
		}
		if _, dup, err := q.Enqueue(ctx, capped("1")); err != nil || !dup {
			t.Fatalf("a redelivery of a waiting message at the cap: dup %v, %v; want dup", dup, err)
		}
		o := msg(other, "1", "x")
		o.MaxPending = 2
		mustEnqueue(t, q, o)
		drain(t, q, now())
		mustEnqueue(t, q, capped("3"))
		drain(t, q, now())
	})

	t.Run("EditQueued", func(t *testing.T) {
		c := conv("edit")
		mustEnqueue(t, q, msg(c, "1", "first"))
		mustEnqueue(t, q, msg(c, "2", "second"))
		it := claim(t, q, 1, now())
		if ok, err := q.EditQueued(ctx, "telegram:edit:m:1", "too late"); err != nil || ok {
			t.Fatalf("edit of the running message: %v %v; want not applied", ok, err)
		}
		if ok, err := q.EditQueued(ctx, "telegram:edit:m:2", "second, edited"); err != nil || !ok {
			t.Fatalf("edit of a queued message: %v %v", ok, err)
		}
		check(t, "finish", q.Finish(ctx, it[0].ID, it[0].Lease, core.StatusDone, ""))
		if got := claim(t, q, 1, now()); texts(got) != "second, edited" {
			t.Fatalf("claimed %q", texts(got))
		} else {
			check(t, "finish", q.Finish(ctx, got[0].ID, got[0].Lease, core.StatusDone, ""))
		}
	})

	t.Run("RetryDeferRelease", func(t *testing.T) {
		c := conv("retry")
		mustEnqueue(t, q, msg(c, "1", "r"))
		it := claim(t, q, 1, now())[0]
		due := now().Add(time.Minute)
		check(t, "retry", q.Retry(ctx, it.ID, it.Lease, due, "provider 500"))
		items, next, err := q.Claim(ctx, 5, now())
		if err != nil || len(items) != 0 || !next.Equal(due) {
			t.Fatalf("before the retry is due: %s, next %v (want %v), %v", texts(items), next, due, err)
		}
		got := claim(t, q, 5, due)
		if len(got) != 1 || got[0].Attempts != 1 || got[0].Interruptions != 0 || got[0].Lease == it.Lease {
			t.Fatalf("the retried item = %+v; want attempts 1 under a new lease", got)
		}
		it = got[0]
		check(t, "defer", q.Defer(ctx, it.ID, it.Lease, due, "cooling", true))
		it = claim(t, q, 5, due)[0]
		if it.Attempts != 1 || !it.Notified {
			t.Fatalf("after a deferral: attempts %d notified %v; want 1, true", it.Attempts, it.Notified)
		}
		check(t, "defer", q.Defer(ctx, it.ID, it.Lease, due, "cooling", false))
		it = claim(t, q, 5, due)[0]
		if !it.Notified {
			t.Fatal("a second deferral forgot that the user was told")
		}
		check(t, "release", q.Release(ctx, it.ID, it.Lease))
		it = claim(t, q, 5, due)[0]
		if it.Attempts != 1 || it.Interruptions != 0 {
			t.Fatalf("after a release: attempts %d interruptions %d; want it back as it was", it.Attempts, it.Interruptions)
		}
		check(t, "finish failed", q.Finish(ctx, it.ID, it.Lease, core.StatusFailed, "gave up: provider 500"))
		if err := q.Finish(ctx, it.ID, it.Lease, "bogus", ""); core.ErrorKind(err) != core.KindInvalid {
			t.Fatalf("finish with a bad status: %v", err)
		}
		fails, err := db.RecentFailures(ctx, 5)
		if err != nil || len(fails) == 0 || fails[0].ID != it.ID || !strings.Contains(fails[0].Reason, "gave up") {
			t.Fatalf("recent failures = %+v, %v", fails, err)
		}
	})

	t.Run("Hasten", func(t *testing.T) {
		// A deferred item is made due now; one running, one due already
		// and an unknown id are left alone.
		c, d := conv("hasten-a"), conv("hasten-b")
		mustEnqueue(t, q, msg(c, "1", "waits"))
		mustEnqueue(t, q, msg(d, "1", "runs"))
		got := claim(t, q, 5, now())
		if texts(got) != "waits,runs" {
			t.Fatalf("claimed %s; want waits,runs", texts(got))
		}
		later := now().Add(time.Hour)
		check(t, "defer", q.Defer(ctx, got[0].ID, got[0].Lease, later, "cooling", true))
		moved, err := db.Hasten(ctx, []int64{got[0].ID, got[1].ID, 1 << 40}, now())
		if err != nil || moved != 1 {
			t.Fatalf("hasten = %d, %v; want the deferred item alone moved", moved, err)
		}
		again := claim(t, q, 5, now())
		if texts(again) != "waits" || !again[0].Notified {
			t.Fatalf("after hasten: %s; want the deferred item due now, as it was (told)", texts(again))
		}
		if moved, err := db.Hasten(ctx, []int64{again[0].ID}, now()); err != nil || moved != 0 {
			t.Fatalf("hasten of a running item = %d, %v; want 0", moved, err)
		}
		check(t, "finish", q.Finish(ctx, again[0].ID, again[0].Lease, core.StatusDone, ""))
		check(t, "finish", q.Finish(ctx, got[1].ID, got[1].Lease, core.StatusDone, ""))
	})

	t.Run("ClaimAside", func(t *testing.T) {
		// A command behind a message that waits (deferred) is claimed at
		// once; behind one that runs or is due, it is not.
		c := conv("aside")
		mustEnqueue(t, q, msg(c, "1", "waits"))
		first := claim(t, q, 5, now())
		if texts(first) != "waits" {
			t.Fatalf("claimed %s; want waits", texts(first))
		}
		mustEnqueue(t, q, msg(c, "2", "hello")) // due, but behind the head
		status := mustEnqueue(t, q, msg(c, "2b", "/status"))
		if _, ok, err := db.ClaimAside(ctx, status, now()); err != nil || ok {
			t.Fatalf("aside behind a running item: ok %v, %v; want not claimed", ok, err)
		}
		due := now().Add(20 * time.Second)
		check(t, "defer", q.Defer(ctx, first[0].ID, first[0].Lease, due, "cooling", true))
		it, ok, err := db.ClaimAside(ctx, status, now())
		if err != nil || !ok || it.ID != status || it.Message == nil || it.Message.Text != "/status" {
			t.Fatalf("aside behind a waiting item: %+v, %v, %v; want /status claimed", it, ok, err)
		}
		if it.Behind == nil || it.Behind.Waiting != 2 || !it.Behind.Next.Equal(due) || it.Behind.Head != first[0].ID {
			t.Fatalf("behind = %+v; want 2 waiting, the first at %s", it.Behind, due)
		}
		if _, ok, _ := db.ClaimAside(ctx, status, now()); ok {
			t.Fatal("an item claimed aside was claimed again")
		}
		// The order is kept for the rest: a message after the command
		// waits for both, and the command's finish leaves the waiting
		// head where it was.
		mustEnqueue(t, q, msg(c, "3", "after"))
		if got := claim(t, q, 5, now()); len(got) != 0 {
			t.Fatalf("claimed %s while the head waits; want nothing", texts(got))
		}
		check(t, "finish aside", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
		if got := claim(t, q, 5, now()); len(got) != 0 {
			t.Fatalf("claimed %s after the aside finish; want nothing until the head is due", texts(got))
		}
		clock.Advance(21 * time.Second)
		for _, want := range []string{"waits", "hello", "after"} {
			got := claim(t, q, 5, now())
			if texts(got) != want {
				t.Fatalf("claimed %s; want %s", texts(got), want)
			}
			check(t, "finish", q.Finish(ctx, got[0].ID, got[0].Lease, core.StatusDone, ""))
		}
		// Behind a due item (a retry's time passed) it is not claimed:
		// the dispatcher takes them in order.
		mustEnqueue(t, q, msg(c, "4", "retried"))
		r := claim(t, q, 1, now())[0]
		check(t, "retry", q.Retry(ctx, r.ID, r.Lease, now(), "500"))
		help := mustEnqueue(t, q, msg(c, "5", "/help"))
		if _, ok, err := db.ClaimAside(ctx, help, now()); err != nil || ok {
			t.Fatalf("aside behind a due item: ok %v, %v; want not claimed", ok, err)
		}
		for _, want := range []string{"retried", "/help"} {
			got := claim(t, q, 5, now())
			if texts(got) != want {
				t.Fatalf("claimed %s; want %s", texts(got), want)
			}
			check(t, "finish", q.Finish(ctx, got[0].ID, got[0].Lease, core.StatusDone, ""))
		}
		// Alone in its conversation it is claimed as a head would be.
		alone := mustEnqueue(t, q, msg(conv("aside-alone"), "1", "/help"))
		it, ok, err = db.ClaimAside(ctx, alone, now())
		if err != nil || !ok || it.Behind == nil || it.Behind.Waiting != 0 {
			t.Fatalf("aside alone: %+v, %v, %v; want claimed, nothing behind", it, ok, err)
		}
		check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
	})

	t.Run("LastFailedMessage", func(t *testing.T) {
		// /retry after an apology: the newest message of the conversation
		// given up since a time, not one given up by the poison guard.
		c := conv("failed")
		start := now()
		if _, ok, err := db.LastFailedMessage(ctx, c, time.Time{}); err != nil || ok {
			t.Fatalf("no failure yet: ok %v, %v", ok, err)
		}
		for _, m := range []struct{ id, text, cause string }{
			{"1", "first", "provider 500"},
			{"2", "second", "the provider sent an answer I could not read"},
			{"3", "crasher", "gave up after 3 interrupted attempts"},
		} {
			mustEnqueue(t, q, msg(c, m.id, m.text))
			it := claim(t, q, 1, now())[0]
			check(t, "fail", q.Finish(ctx, it.ID, it.Lease, core.StatusFailed, m.cause))
		}
		in, ok, err := db.LastFailedMessage(ctx, c, start.Add(-time.Millisecond))
		if err != nil || !ok || in.Text != "second" {
			t.Fatalf("last failed = %q, %v, %v; want second (the poison guard's crasher left out)", in.Text, ok, err)
		}
		if _, ok, err := db.LastFailedMessage(ctx, c, now()); err != nil || ok {
			t.Fatalf("none failed since now: ok %v, %v", ok, err)
		}
		if _, ok, _ := db.LastFailedMessage(ctx, conv("other"), time.Time{}); ok {
			t.Fatal("another conversation's failure was found")
		}
	})

	t.Run("RequestSender", func(t *testing.T) {
		// Who sent a request: a message's sender as delivered, a
		// reaction's user, a firing's creator; nothing for an unknown id.
		c := conv("sender")
		m := msg(c, "1", "what is a monad")
		m.Message.UserName, m.Message.Private = "@alice", true
		mid := mustEnqueue(t, q, m)
		in, ok, err := db.RequestSender(ctx, mid)
		if err != nil || !ok || in.UserID != "u1" || in.UserName != "@alice" || !in.Private || in.Text != "what is a monad" {
			t.Fatalf("sender of a message = %+v, %v, %v; want u1 (@alice, private)", in, ok, err)
		}
		re := core.Reaction{Conversation: c, EventID: "r1", MessageID: "b1", UserID: "u2", Emoji: "👎", Added: true, Polarity: core.Negative}
		rid := mustEnqueue(t, q, core.QueueItem{Kind: core.EventReaction, Conversation: c, DedupeKey: "sender:r1", Reaction: &re})
		if in, ok, err := db.RequestSender(ctx, rid); err != nil || !ok || in.UserID != "u2" || in.Conversation != c || in.ReplyTo != "b1" || in.MessageID != "" {
			t.Fatalf("sender of a reaction = %+v, %v, %v; want u2, reacting to b1", in, ok, err)
		}
		// A firing stands for its creator's message, private as the
		// schedule was made.
		f := core.Firing{ScheduleID: 3, At: now(), Source: core.ScheduleChat, Conversation: c, Prompt: "water", Creator: "u1", Private: true}
		fid := mustEnqueue(t, q, core.QueueItem{Kind: core.EventScheduled, Conversation: c, DedupeKey: "sender:f1", Firing: &f})
		if in, ok, err := db.RequestSender(ctx, fid); err != nil || !ok || in.UserID != "u1" || !in.Private || in.Origin != core.OriginSchedule {
			t.Fatalf("sender of a firing = %+v, %v, %v; want u1, private, from a schedule", in, ok, err)
		}
		if _, ok, err := db.RequestSender(ctx, rid+1000); err != nil || ok {
			t.Fatalf("sender of no request: ok %v, %v", ok, err)
		}
		for range 3 { // done, as the gateway leaves them: the sender stays known
			it := claim(t, q, 1, now())[0]
			check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
		}
		if in, ok, err := db.RequestSender(ctx, mid); err != nil || !ok || in.UserID != "u1" {
			t.Fatalf("sender of a finished message = %+v, %v, %v; want u1", in, ok, err)
		}
	})

	t.Run("EventKinds", func(t *testing.T) {
		c := conv("kinds")
		r := core.Reaction{Conversation: c, MessageID: "9", UserID: "u1", Emoji: "👍", Added: true}
		f := core.Firing{ScheduleID: 7, Prompt: "daily summary", At: now()}
		mustEnqueue(t, q, core.QueueItem{Kind: core.EventReaction, Conversation: c, DedupeKey: "r:1", Reaction: &r})
		mustEnqueue(t, q, core.QueueItem{Kind: core.EventScheduled, Conversation: c, DedupeKey: "s:1", Firing: &f})
		it := claim(t, q, 1, now())[0]
		if it.Kind != core.EventReaction || it.Reaction == nil || it.Reaction.Emoji != "👍" || it.Conversation != c {
			t.Fatalf("reaction item = %+v", it)
		}
		check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
		it = claim(t, q, 1, now())[0]
		if it.Kind != core.EventScheduled || it.Firing == nil || it.Firing.Prompt != "daily summary" || it.Firing.ScheduleID != 7 {
			t.Fatalf("firing item = %+v", it)
		}
		check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
	})

	t.Run("CountsAndOldest", func(t *testing.T) {
		c := conv("counts")
		clock.Advance(time.Second)
		at := clock.Now()
		mustEnqueue(t, q, msg(c, "1", "x"))
		mustEnqueue(t, q, msg(c, "2", "y"))
		claim(t, q, 1, now())
		counts, err := db.QueueCounts(ctx)
		if err != nil || counts[core.StatusRunning] != 1 || counts[core.StatusQueued] != 1 {
			t.Fatalf("counts = %v, %v; want 1 running, 1 queued", counts, err)
		}
		oldest, err := db.OldestQueued(ctx)
		if err != nil || !oldest.Equal(at) {
			t.Fatalf("oldest queued = %v, %v; want %v", oldest, err, at)
		}
		drain(t, q, now())
	})
}

// drain claims and finishes everything due at now.
func drain(t *testing.T, q core.QueueStore, now time.Time) {
	t.Helper()
	for range 1000 {
		items := claim(t, q, 10, now)
		if len(items) == 0 {
			return
		}
		for _, it := range items {
			check(t, "finish", q.Finish(ctx, it.ID, it.Lease, core.StatusDone, ""))
		}
	}
	t.Fatal("the queue does not drain")
}
