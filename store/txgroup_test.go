package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
