package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// holdWriter starts a write transaction that holds SQLite's writer until
// the returned release is called; the transactions started meanwhile
// queue in db.txs.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	held, let := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.txLocking(context.Background(), func(tx *txn) error {
			close(held)
			<-let
			return nil
		})
	}()
	<-held
	return func() {
		close(let)
		if err := <-done; err != nil {
			t.Errorf("the transaction holding the writer: %v", err)
		}
	}
}

// waitQueued waits until n transactions queue behind the writer.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		db.txs.mu.Lock()
		got := len(db.txs.waiting)
		db.txs.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions queued behind the writer, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// putKV is a write transaction of the test: it stores key, then fails
// with fail (nil: commits).
func putKV(db *DB, ctx context.Context, key string, fail error) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO lua_kv (script, key, value, updated_at) VALUES ('t', ?, 'v', 0)`, key); err != nil {
			return err
		}
		return fail
	})
}

func keysStored(t *testing.T, db *DB) map[string]bool {
	t.Helper()
	rows, err := db.r.QueryContext(context.Background(), `SELECT key FROM lua_kv WHERE script = 't'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got[k] = true
	}
	return got
}

// TestQueuedWriteTransactionsCommitAsOneGroup: transactions that queue
// behind the writer are written together, in one transaction, each
// under its own savepoint: one that fails is undone alone and gets its
// error, the others commit, and each caller hears its own outcome.
func TestQueuedWriteTransactionsCommitAsOneGroup(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	release := holdWriter(t, db)

	var begins atomic.Int64
	db.TraceTrips(func(q string, inTx bool) {
		if q == "BEGIN" {
			begins.Add(1)
		}
	})
	defer db.TraceTrips(nil)

	const n = 10
	failing := map[int]bool{3: true, 7: true}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var fail error
			if failing[i] {
				fail = fmt.Errorf("member %d refuses", i)
			}
			errs[i] = putKV(db, ctx, fmt.Sprint("k", i), fail)
		})
	}
	waitQueued(t, db, n)
	release()
	wg.Wait()

	if b := begins.Load(); b != 1 {
		t.Errorf("%d transactions began for %d queued ones, want 1 (one group)", b, n)
	}
	got := keysStored(t, db)
	for i := range n {
		key := fmt.Sprint("k", i)
		switch {
		case failing[i] && (errs[i] == nil || errs[i].Error() != fmt.Sprintf("member %d refuses", i)):
			t.Errorf("member %d: err = %v, want its own error", i, errs[i])
		case failing[i] && got[key]:
			t.Errorf("member %d failed, yet its write was committed", i)
		case !failing[i] && errs[i] != nil:
			t.Errorf("member %d: %v", i, errs[i])
		case !failing[i] && !got[key]:
			t.Errorf("member %d committed, yet %s is not stored", i, key)
		}
	}
}

// TestGroupedTransactionPanicsInItsCaller: a grouped transaction's fn
// runs on another goroutine; its panic is undone there and raised again
// in its own caller, and the group's others commit.
func TestGroupedTransactionPanicsInItsCaller(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	release := holdWriter(t, db)

	var wg sync.WaitGroup
	var recovered atomic.Value
	wg.Go(func() {
		defer func() { recovered.Store(fmt.Sprint(recover())) }()
		db.tx(ctx, func(tx *txn) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO lua_kv (script, key, value, updated_at) VALUES ('t', 'panicked', 'v', 0)`); err != nil {
				return err
			}
			panic("boom")
		})
	})
	waitQueued(t, db, 1)
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = putKV(db, ctx, fmt.Sprint("k", i), nil) })
	}
	waitQueued(t, db, 3)
	release()
	wg.Wait()

	if r, _ := recovered.Load().(string); r != "boom" {
		t.Errorf("the caller of the panicking transaction recovered %q, want boom", r)
	}
	got := keysStored(t, db)
	if got["panicked"] {
		t.Error("the panicking transaction's write was committed")
	}
	for i, err := range errs {
		if err != nil || !got[fmt.Sprint("k", i)] {
			t.Errorf("member %d beside the panic: err %v, stored %v", i, err, got[fmt.Sprint("k", i)])
		}
	}
}

// TestQueuedTransactionGivesUpWithItsContext: a transaction whose
// context ends while it queues is not run and returns the context's
// error; the writer goes on with the others.
func TestQueuedTransactionGivesUpWithItsContext(t *testing.T) {
	db := openTest(t, Options{})
	release := holdWriter(t, db)

	cctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- putKV(db, cctx, "cancelled", nil) }()
	waitQueued(t, db, 1)
	other := make(chan error, 1)
	go func() { other <- putKV(db, context.Background(), "other", nil) }()
	waitQueued(t, db, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while queued: err = %v, want context.Canceled", err)
	}
	release()
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	got := keysStored(t, db)
	if got["cancelled"] || !got["other"] {
		t.Errorf("stored %v, want only other", got)
	}
}

// TestBrokenGroupRunsEachAlone: when the group's own statements fail
// (here one member ends the transaction under the others), nothing of
// it commits and each member runs again on its own: the others commit,
// and the one that broke it gets its own failure.
func TestBrokenGroupRunsEachAlone(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	release := holdWriter(t, db)

	var breakerRuns, memberRuns atomic.Int64
	var wg sync.WaitGroup
	var breakerErr error
	wg.Go(func() {
		breakerErr = db.tx(ctx, func(tx *txn) error {
			breakerRuns.Add(1)
			_, err := tx.ExecContext(ctx, `ROLLBACK`)
			return err
		})
	})
	waitQueued(t, db, 1)
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			errs[i] = db.tx(ctx, func(tx *txn) error {
				memberRuns.Add(1)
				_, err := tx.ExecContext(ctx, `INSERT INTO lua_kv (script, key, value, updated_at) VALUES ('t', ?, 'v', 0)`, fmt.Sprint("k", i))
				return err
			})
		})
	}
	waitQueued(t, db, 4)
	release()
	wg.Wait()

	if breakerErr == nil {
		t.Error("the transaction that rolled itself back reported no error")
	}
	if b := breakerRuns.Load(); b != 2 {
		t.Errorf("the breaking transaction ran %d times, want 2 (in the group, then alone)", b)
	}
	got := keysStored(t, db)
	for i, err := range errs {
		if err != nil || !got[fmt.Sprint("k", i)] {
			t.Errorf("member %d: err %v, stored %v", i, err, got[fmt.Sprint("k", i)])
		}
	}
	// The members after the breaker never ran in the group (it broke at
	// their first savepoint): each ran once, alone.
	if m := memberRuns.Load(); m != 3 {
		t.Errorf("the other members ran %d times in all, want 3", m)
	}
}

// TestGroupMemberWhoseGoroutineExits: a fn that ends the goroutine it
// runs on without a panic (runtime.Goexit, as a test's t.Fatal does)
// ends the group's writer too; the group is rolled back, the member
// queued after it hears that nothing of its own was written, and the
// writer is free for the next transaction.
func TestGroupMemberWhoseGoroutineExits(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	release := holdWriter(t, db)

	var wg sync.WaitGroup
	wg.Go(func() { putKV(db, ctx, "first", nil) }) // writes the group
	waitQueued(t, db, 1)
	wg.Go(func() {
		db.tx(ctx, func(tx *txn) error { runtime.Goexit(); return nil })
	})
	waitQueued(t, db, 2)
	after := make(chan error, 1)
	wg.Go(func() { after <- putKV(db, ctx, "after", nil) })
	waitQueued(t, db, 3)
	release()
	wg.Wait()

	err := <-after
	if got := keysStored(t, db); err == nil && !got["after"] {
		t.Errorf("the member after the exit was told its transaction committed, yet its write is not stored")
	} else if err != nil && !errors.Is(err, errGroupUnfinished) {
		t.Errorf("the member after the exit: err = %v, want errGroupUnfinished", err)
	}
	// Liveness, not speed: the writer's connection was given back.
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := putKV(db, lctx, "later", nil); err != nil {
		t.Errorf("a later write transaction: %v (the group's transaction was left open on the writer)", err)
	}
}

// TestDiskFullInAGroup: SQLITE_FULL rolls back the whole transaction, so
// the member's savepoint is gone with it; the group falls back, each
// runs alone, the others commit and the one that filled the disk gets
// its own error.
func TestDiskFullInAGroup(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	var pages int64
	if err := db.w.DB.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.DB.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+8)); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			errs[i] = db.tx(ctx, func(tx *txn) error {
				v := "v"
				if i == 1 {
					v = strings.Repeat("x", 1<<20) // past max_page_count
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO lua_kv (script, key, value, updated_at) VALUES ('t', ?, ?, 0)`, fmt.Sprint("k", i), v)
				return err
			})
		})
		waitQueued(t, db, i+1)
	}
	release()
	wg.Wait()
	got := keysStored(t, db)
	for i, err := range errs {
		if full := i == 1; full != (err != nil) || full == got[fmt.Sprint("k", i)] {
			t.Errorf("member %d: err = %v, stored %v (only member 1 fills the disk)", i, err, got[fmt.Sprint("k", i)])
		}
	}
}

// TestRunAgainStartsFromScratch: a closure that the fallback runs again
// reports what its last run did, not what its rolled-back first run
// collected. CompactHistory compacted three messages in the group (an
// earlier member had appended them); the group failed, the appending
// member's context ended before its run alone, so the compaction's run
// alone finds nothing, and says so.
func TestRunAgainStartsFromScratch(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	s, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "telegram", Chat: "again"})
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)

	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	var wg sync.WaitGroup
	var compactErr error
	var n int
	wg.Go(func() {
		db.AppendMessages(actx, s.ID, []core.ChatMessage{{Role: core.RoleUser, Content: "a"}, {Role: core.RoleAssistant, Content: "b"}, {Role: core.RoleUser, Content: "c"}})
	})
	waitQueued(t, db, 1)
	wg.Go(func() { n, compactErr = db.CompactHistory(ctx, s.ID, 0, "summary") })
	waitQueued(t, db, 2)
	wg.Go(func() {
		// Breaks the group (as a full disk would), once the appending
		// member's caller has given up.
		db.tx(ctx, func(tx *txn) error {
			cancelA()
			_, err := tx.ExecContext(ctx, `ROLLBACK`)
			return err
		})
	})
	waitQueued(t, db, 3)
	release()
	wg.Wait()

	hist, err := db.History(ctx, s.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if compactErr != nil || n != len(hist) {
		t.Errorf("CompactHistory: n = %d, err %v; the history holds %d entries (nothing was appended, so nothing compacted)", n, compactErr, len(hist))
	}
}
