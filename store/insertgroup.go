package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Enqueues that arrive together (a getUpdates batch's chats, each on its
// own goroutine) would each be a transaction of its own on the single
// SQLite writer, one behind the other, each writing the queue's pages
// and committing again. insertGroup lets the first one write alone and
// queues those that come meanwhile; when it is done, the first of them
// writes all that queued, in one transaction. A lone enqueue is one
// statement, as before, and waits for nothing.

// insertGroup is the state of the grouped SQLite enqueues.
type insertGroup struct {
	mu      sync.Mutex
	writing bool
	waiting []*serialInsert
}

// serialInsert is one enqueue's insert: its statement's arguments
// (insertSerialArgs) and, once written, what it returned.
type serialInsert struct {
	args    []any
	id      int64
	claimed bool
	err     error // sql.ErrNoRows: not inserted (a duplicate, or full)

	// done is closed when the insert was written, or when this one is
	// to write batch (the inserts queued behind the last group).
	done  chan struct{}
	batch []*serialInsert
}

// insert writes r, alone or in a group with the inserts that queued
// while another group was written.
func (g *insertGroup) insert(ctx context.Context, db *DB, r *serialInsert) {
	g.mu.Lock()
	if g.writing {
		r.done = make(chan struct{})
		g.waiting = append(g.waiting, r)
		g.mu.Unlock()
		<-r.done
		if r.batch == nil {
			return // written by another
		}
	} else {
		g.writing = true
		g.mu.Unlock()
		r.batch = []*serialInsert{r}
	}
	batch := r.batch
	db.writeInserts(ctx, batch)
	g.mu.Lock()
	next := g.waiting
	g.waiting = nil
	g.writing = len(next) > 0
	g.mu.Unlock()
	for _, o := range batch[1:] {
		close(o.done)
	}
	if len(next) > 0 {
		next[0].batch = next
		close(next[0].done)
	}
}

// writeInserts runs the inserts of batch: one statement when it is
// alone, else one transaction (not cut short by the context of the one
// that writes it: the others wait for it). When that fails, nothing of
// it was written and each is tried on its own, so one bad insert fails
// only its own enqueue.
func (db *DB) writeInserts(ctx context.Context, batch []*serialInsert) {
	one := func(r *serialInsert) {
		r.err = db.w.QueryRowContext(ctx, insertSerialQuery, r.args...).Scan(&r.id, &r.claimed)
	}
	if len(batch) == 1 {
		one(batch[0])
		return
	}
	ctx = context.WithoutCancel(ctx)
	err := db.tx(ctx, func(tx *txn) error {
		for _, r := range batch {
			r.id, r.claimed = 0, false
			r.err = tx.QueryRowContext(ctx, insertSerialQuery, r.args...).Scan(&r.id, &r.claimed)
			if r.err != nil && !errors.Is(r.err, sql.ErrNoRows) {
				return r.err
			}
		}
		return nil
	})
	if err != nil {
		for _, r := range batch {
			r.id, r.claimed = 0, false
			one(r)
		}
	}
}
