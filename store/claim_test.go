package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestUndecodableRowDoesNotStallClaim: a row whose payload cannot be
// read is marked failed (and logged with its id); the rest of the queue,
// its own conversation's next message included, is claimed as usual. On
// both engines (PostgreSQL claims in one statement and fails such a row
// after it).
func TestUndecodableRowDoesNotStallClaim(t *testing.T) {
	for _, engine := range []struct {
		name string
		open func(testing.TB, Options) *DB
	}{{"sqlite", openTest}, {"postgres", openPG}} {
		t.Run(engine.name, func(t *testing.T) { undecodableRowDoesNotStallClaim(t, engine.open) })
	}
}

func undecodableRowDoesNotStallClaim(t *testing.T, open func(testing.TB, Options) *DB) {
	ctx := context.Background()
	var logs bytes.Buffer
	db := open(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := core.ConversationKey{Channel: "telegram", Chat: "a"}
	b := core.ConversationKey{Channel: "telegram", Chat: "b"}
	badID, _, err := db.Enqueue(ctx, msgItem(a, "1", "soon broken"))
	if err != nil {
		t.Fatal(err)
	}
	noMsgID, _, _ := db.Enqueue(ctx, msgItem(a, "2", "soon empty"))
	db.Enqueue(ctx, msgItem(a, "3", "a after"))
	db.Enqueue(ctx, msgItem(b, "4", "b fine"))
	if _, err := db.w.ExecContext(ctx, `UPDATE queue SET payload = '{not json' WHERE id = ?`, badID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.ExecContext(ctx, `UPDATE queue SET payload = '{}' WHERE id = ?`, noMsgID); err != nil {
		t.Fatal(err)
	}

	var got []string
	for range 4 {
		items, next, err := db.Claim(ctx, 10, time.Now())
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		for _, it := range items {
			got = append(got, it.Message.Text)
			db.Finish(ctx, it.ID, it.Lease, core.StatusDone, "")
		}
		if len(items) == 0 && next.IsZero() {
			break
		}
	}
	if strings.Join(got, ",") != "b fine,a after" {
		t.Fatalf("claimed %q, want b fine then a after", got)
	}
	for _, id := range []int64{badID, noMsgID} {
		st, _, lastErr, _ := db.QueueStatus(ctx, id)
		if st != core.StatusFailed || !strings.Contains(lastErr, "cannot be read") {
			t.Errorf("row %d: status %s, last error %q; want failed, cannot be read", id, st, lastErr)
		}
	}
	if !strings.Contains(logs.String(), "request=1") || !strings.Contains(logs.String(), "request=2") {
		t.Errorf("the log does not name the unreadable rows:\n%s", logs.String())
	}
}

// TestPruneQueueKeepsUnfinishedAndRecentRows: only finished rows past the
// retention go; queued and running rows and the replies stay.
func TestPruneQueueKeepsUnfinishedAndRecentRows(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	db := openTest(t, Options{Now: c.Now, QueueRetention: 48 * time.Hour})
	conv := func(s string) core.ConversationKey { return core.ConversationKey{Channel: "telegram", Chat: s} }
	ids := map[string]int64{}
	for _, name := range []string{"old-done", "old-failed", "old-queued", "old-running", "new-done"} {
		id, _, err := db.Enqueue(ctx, msgItem(conv(name), name, name))
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	items, _, _ := db.Claim(ctx, 10, c.Now())
	for _, it := range items {
		switch it.Message.Text {
		case "old-done":
			db.Finish(ctx, it.ID, it.Lease, core.StatusDone, "")
		case "old-failed":
			db.Finish(ctx, it.ID, it.Lease, core.StatusFailed, "boom")
		case "old-queued":
			db.Retry(ctx, it.ID, it.Lease, c.Now(), "later")
		}
	}
	s, _ := db.ActiveSession(ctx, conv("old-done"))
	if _, err := db.SaveReply(ctx, &core.Reply{RequestID: ids["old-done"], SessionID: s.ID, Conversation: conv("old-done"), Text: "a", Parts: []string{"a"}}, nil); err != nil {
		t.Fatal(err)
	}
	c.Advance(72 * time.Hour)
	for _, it := range items {
		if it.Message.Text == "new-done" {
			db.Finish(ctx, it.ID, it.Lease, core.StatusDone, "")
		}
	}
	n, err := db.PruneQueue(ctx)
	if err != nil || n != 2 {
		t.Fatalf("prune = %d, %v; want the 2 finished rows past the retention", n, err)
	}
	for name, id := range ids {
		st, _, _, err := db.QueueStatus(ctx, id)
		gone := err != nil
		if want := name == "old-done" || name == "old-failed"; gone != want {
			t.Errorf("%s: status %q, pruned %v; want pruned %v", name, st, gone, want)
		}
	}
	if r, _ := db.ReplyForRequest(ctx, ids["old-done"], conv("old-done")); r == nil {
		t.Error("the reply of a pruned request was deleted")
	}
	keepAll := openTest(t, Options{Now: c.Now})
	if n, err := keepAll.PruneQueue(ctx); n != 0 || err != nil {
		t.Errorf("prune without a retention = %d, %v", n, err)
	}
}

// TestEnqueueClaim: an enqueue claims its item in the same write when its
// conversation is idle and it is due; then it is running under a lease
// that finishes it, and no claim returns it again. Behind an unfinished
// item, or not yet due, it is only queued and claimed in order later. A
// sole claimer's first claiming enqueue still takes back what a crash
// left running, without ending its own lease.
func TestEnqueueClaim(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir, Options{SoleClaimer: true, Holder: "me", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a := core.ConversationKey{Channel: "telegram", Chat: "a"}
	b := core.ConversationKey{Channel: "telegram", Chat: "b"}
	// A crash left conversation b running.
	db.Enqueue(ctx, msgItem(b, "0", "b crashed"))
	if items, _, _ := db.Claim(ctx, 1, time.Now()); len(items) != 1 {
		t.Fatalf("claim before the crash: %d items", len(items))
	}
	db.Close()
	db, err = Open(ctx, dir, Options{SoleClaimer: true, Holder: "me", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	now := time.Now()
	// enqueueClaim returns the item handed to start (nil when none was)
	// and checks that it was started before the log was flushed and that
	// its Durable is closed by the time the call returns.
	enqueueClaim := func(it core.QueueItem) (*core.QueueItem, bool, error) {
		t.Helper()
		var got *core.QueueItem
		synced := 0
		db.syncFile = func(path string) error { synced++; return db.files.sync(path) }
		claimed, dup, err := db.EnqueueClaim(ctx, it, now, func(c core.QueueItem) {
			if synced != 0 {
				t.Errorf("item %q started after its flush", c.DedupeKey)
			}
			got = &c
		})
		if claimed != (got != nil) {
			t.Fatalf("claimed %v, but start called: %v", claimed, got != nil)
		}
		if got != nil {
			select {
			case <-got.Durable:
			default:
				t.Fatalf("item %q: Durable still open after EnqueueClaim returned", got.DedupeKey)
			}
			if synced != 1 {
				t.Fatalf("item %q: the log flushed %d times; want once", got.DedupeKey, synced)
			}
		}
		return got, dup, err
	}
	first, dup, err := enqueueClaim(msgItem(a, "1", "a first"))
	if err != nil || dup || first == nil {
		t.Fatalf("enqueue-claim of an idle conversation: %+v, dup %v, %v; want it claimed", first, dup, err)
	}
	if first.Message == nil || first.Message.Text != "a first" || first.Lease == 0 || !first.NoReply || first.Attempts != 0 || first.Interruptions != 0 {
		t.Fatalf("claimed item = %+v", first)
	}
	if st, _, _, _ := db.QueueStatus(ctx, first.ID); st != core.StatusRunning {
		t.Fatalf("status after enqueue-claim = %s, want running", st)
	}
	second, dup, err := enqueueClaim(msgItem(a, "2", "a second"))
	if err != nil || dup || second != nil {
		t.Fatalf("enqueue-claim behind a running item: %+v, %v, %v; want queued only", second, dup, err)
	}
	later := msgItem(core.ConversationKey{Channel: "telegram", Chat: "c"}, "3", "c later")
	later.NotBefore = now.Add(time.Hour)
	if c, _, err := enqueueClaim(later); err != nil || c != nil {
		t.Fatalf("enqueue-claim of an item not yet due: %+v, %v; want queued only", c, err)
	}
	if again, dup, err := enqueueClaim(msgItem(a, "1", "a first")); err != nil || !dup || again != nil {
		t.Fatalf("second enqueue-claim of one message: %+v, dup %v, %v; want a duplicate", again, dup, err)
	}

	// The claim now returns b (taken back: an interruption), not a's first.
	items, _, err := db.Claim(ctx, 10, now)
	if err != nil {
		t.Fatal(err)
	}
	if texts(items) != "b crashed" || items[0].Interruptions != 1 {
		t.Fatalf("claim = %q %+v, want only b's item, taken back", texts(items), items)
	}
	if err := db.Finish(ctx, first.ID, first.Lease, core.StatusDone, ""); err != nil {
		t.Fatalf("finish under the enqueue's lease: %v", err)
	}
	items, _, _ = db.Claim(ctx, 10, now)
	if texts(items) != "a second" {
		t.Fatalf("claim after a's first finished = %q, want a second", texts(items))
	}
}

// TestUnreadableFailKeepsAnEnqueueInFlight: on PostgreSQL an unreadable
// head is failed as a finish is, under its conversation's lock, so an
// enqueue of that conversation in flight (its row inserted behind the
// head, not committed yet) is not left without a head when the failed
// one's head moves on: the next claim gets it.
func TestUnreadableFailKeepsAnEnqueueInFlight(t *testing.T) {
	ctx := context.Background()
	db := openPG(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "inflight"}
	badID, _, err := db.Enqueue(ctx, msgItem(conv, "1", "soon broken"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.ExecContext(ctx, `UPDATE queue SET payload = '{not json' WHERE id = ?`, badID); err != nil {
		t.Fatal(err)
	}
	// The enqueue in flight: the conversation's lock, the row inserted.
	tx, err := db.w.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, convLockSpace, conv.String()); err != nil {
		t.Fatal(err)
	}
	in := core.Inbound{Conversation: conv, MessageID: "2", Text: "after"}
	raw, _ := json.Marshal(payload{Message: &in})
	if _, err := tx.Exec(`INSERT INTO queue (dedupe_key, kind, conversation, payload, not_before, created_at, updated_at) VALUES ($1, 'message', $2, $3, 0, 1, 1)`,
		"telegram:m:2", conv.String(), string(raw)); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		_, _, err := db.Claim(ctx, 10, time.Now())
		claimed <- err
	}()
	// The claim fails the unreadable head: it waits for the lock.
	deadline := time.Now().Add(10 * time.Second)
	for waiting := 0; waiting == 0; {
		select {
		case err := <-claimed:
			claimed <- err
			waiting = 1 // it did not wait
			continue
		default:
		}
		if err := db.w.DB.QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim neither returned nor waited for the conversation's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("claim: %v", err)
	}
	if st, _, _, _ := db.QueueStatus(ctx, badID); st != core.StatusFailed {
		t.Fatalf("the unreadable item is %s, want failed", st)
	}
	items, _, err := db.Claim(ctx, 10, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Message == nil || items[0].Message.Text != "after" {
		t.Fatalf("claimed %+v; want the message enqueued meanwhile", items)
	}
}

// TestClaimDoesNotWaitForTheDisk: on PostgreSQL a claim commits with
// synchronous_commit off (lost with a crash of the server, the item is
// only claimable again), an enqueue with it on (an accepted message must
// survive one). A trigger records the setting each write ran under.
func TestClaimDoesNotWaitForTheDisk(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir(), Options{Postgres: &Postgres{DSN: pgtest.DurableDSN(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE seen_sync (op TEXT, setting TEXT)`,
		`CREATE FUNCTION note_sync() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO seen_sync VALUES (TG_OP, current_setting('synchronous_commit'));
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER note_sync AFTER INSERT OR UPDATE ON queue FOR EACH ROW EXECUTE FUNCTION note_sync()`,
	} {
		if _, err := db.w.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conv := core.ConversationKey{Channel: "telegram", Chat: "sync"}
	if _, _, err := db.Enqueue(ctx, msgItem(conv, "1", "hello")); err != nil {
		t.Fatal(err)
	}
	if items, _, err := db.Claim(ctx, 1, time.Now()); err != nil || len(items) != 1 {
		t.Fatalf("claim = %d items, %v; want the message", len(items), err)
	}
	rows, err := db.w.DB.QueryContext(ctx, `SELECT op, setting FROM seen_sync`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var seen []string
	for rows.Next() {
		var op, setting string
		if err := rows.Scan(&op, &setting); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, op+" "+setting)
	}
	if strings.Join(seen, ", ") != "INSERT on, UPDATE off" {
		t.Fatalf("the writes ran with synchronous_commit %q; want the enqueue's INSERT on, the claim's UPDATE off", seen)
	}
}

// TestSoleHolderLeaseStaysHeld: on SQLite the one process takes each
// singleton lease once and never renews it; it reads as held for as long
// as the process runs (the status page showed it not held after its
// first TTL), and the next process takes it at once.
func TestSoleHolderLeaseStaysHeld(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir, Options{SoleClaimer: true, Holder: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.AcquireLease(ctx, "maintenance", "first", time.Millisecond); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	ls, err := db.Leases(ctx)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leases %v, %v", ls, err)
	}
	if later := time.Now().Add(24 * time.Hour); !ls[0].Held(later) {
		t.Errorf("the sole holder's lease reads as not held a day on: %+v", ls[0])
	}
	db.Close()
	db, err = Open(ctx, dir, Options{SoleClaimer: true, Holder: "second"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, ok, err := db.AcquireLease(ctx, "maintenance", "second", time.Millisecond); err != nil || !ok {
		t.Fatalf("the next process's acquire: %v %v", ok, err)
	}
}
