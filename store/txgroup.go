package store

import (
	"context"
	"errors"
)

// SQLite has one writer. Write transactions that arrive while another is
// running (a reply being stored, another item finished, under load) used
// to wait for the writer's connection one by one, and database/sql hands
// a freed connection to a waiter at random: each one's turn began only
// once its goroutine was scheduled again, and when the machine was busy
// (a garbage collection most) the writer sat idle between them while
// the queue behind it grew. txGroup queues them instead, in order of
// arrival; the one writing, when done, hands the whole queue (up to
// txGroupMax) to its first, which runs them one after the other in one
// transaction, each under a savepoint of its own: one that fails is
// undone alone, and the others commit together, with one commit's
// write-ahead log frames for the pages they share. A transaction that
// finds none running runs alone, as before, and waits for nothing.
//
// A grouped transaction's fn runs on the goroutine of the one writing
// the group (fn is a closure over its caller's state, which is waiting
// for it). When the group cannot be committed, nothing of it was
// written, and each of its transactions runs again on its own (tx's
// contract: fn starts from scratch each time).

// txGroupMax bounds a group: the one writing it waits for all of them.
const txGroupMax = 32

// errGroupUnfinished is the outcome of a grouped transaction whose group
// ended without a commit or a rollback (a member's goroutine exited).
var errGroupUnfinished = errors.New("store: the grouped write transaction did not finish; nothing of it was written")

// txGroup is the state of the grouped SQLite write transactions.
type txGroup = writeQueue[*groupedTx]

// groupedTx is one write transaction of a group and its outcome.
type groupedTx struct {
	writeSlot[*groupedTx]
	ctx context.Context
	fn  func(*txn) error
	err error
	// panicked is what fn panicked with: it panics again in its caller.
	panicked any
}

// groupedTx runs fn in a write transaction on SQLite, alone or in a group
// with the transactions that queued while another was written. A caller
// whose context ends while it waits gives up, its fn not run, unless it
// was already taken into a group being written (its outcome is then
// waited for).
func (db *DB) groupedTx(ctx context.Context, fn func(*txn) error) error {
	t := &groupedTx{ctx: ctx, fn: fn}
	batch, err := db.txs.join(ctx, t)
	if err != nil {
		return err
	}
	if batch == nil {
		return t.outcome() // written by another
	}
	// Even when a lone fn panics: the others waiting for this group are
	// told, and the next group is handed on.
	defer db.txs.handOn(batch, txGroupMax)
	db.writeGroup(batch)
	return t.outcome()
}

// outcome is the transaction's error, or its fn's panic again.
func (t *groupedTx) outcome() error {
	if t.panicked != nil {
		panic(t.panicked)
	}
	return t.err
}

// writeGroup runs the transactions of batch: alone when it is one, else
// in one transaction with a savepoint each. When the group's own
// statements fail (its BEGIN, a savepoint, the commit), it is rolled
// back and each runs on its own.
func (db *DB) writeGroup(batch []*groupedTx) {
	if len(batch) == 1 {
		t := batch[0]
		t.err = db.tx1(t.ctx, nil, t.fn)
		return
	}
	// Not cut short by the context of the one that writes it: the others
	// wait for it.
	ctx := context.WithoutCancel(batch[0].ctx)
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		db.writeAlone(batch)
		return
	}
	// A fn whose goroutine exits (runtime.Goexit: a test's t.Fatal) ends
	// this one, past any recover: the transaction is rolled back, and
	// the others hear that nothing of theirs was written.
	finished := false
	defer func() {
		if finished {
			return
		}
		tx.Rollback()
		for _, t := range batch {
			if t.panicked == nil {
				t.err = errGroupUnfinished
			}
		}
	}()
	// Each counts toward the background checkpoint as a transaction of
	// its own (the group's BEGIN counted one).
	for range batch[1:] {
		db.trips.ckpt.Load().wrote()
	}
	ok := true
	for _, t := range batch {
		if t.err = t.ctx.Err(); t.err != nil {
			continue // ended while it waited: not run
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT grouped`); err != nil {
			ok = false
			break
		}
		t.panicked, t.err = caught(func() error { return t.fn(tx) })
		if t.err == nil && t.panicked == nil {
			// Ended before its commit: undone, as tx1 does.
			t.err = t.ctx.Err()
		}
		if t.err != nil || t.panicked != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO grouped`); err != nil {
				ok = false
				break
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE grouped`); err != nil {
			ok = false
			break
		}
	}
	if ok {
		ok = tx.Commit() == nil
	} else {
		tx.Rollback()
	}
	finished = true
	if tx.missed {
		db.w.prepareWanted(ctx)
	}
	if !ok {
		db.writeAlone(batch)
	}
}

// caught runs f, catching its panic.
func caught(f func() error) (panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	return nil, f()
}

// writeAlone runs each transaction of a group that could not be
// committed on its own (those whose fn panicked keep that outcome).
func (db *DB) writeAlone(batch []*groupedTx) {
	for _, t := range batch {
		if t.panicked != nil {
			continue
		}
		t.panicked, t.err = caught(func() error { return db.tx1(t.ctx, nil, t.fn) })
	}
}
