package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
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
	ctx     context.Context
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
// while another group was written. A caller whose context ends while it
// waits gives up unless its insert was already taken into a group being
// written (its outcome is then waited for: it may commit).
func (g *insertGroup) insert(ctx context.Context, db *DB, r *serialInsert) {
	r.ctx = ctx
	g.mu.Lock()
	if g.writing {
		r.done = make(chan struct{})
		g.waiting = append(g.waiting, r)
		g.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			g.mu.Lock()
			if i := slices.Index(g.waiting, r); i >= 0 {
				g.waiting = slices.Delete(g.waiting, i, i+1)
				g.mu.Unlock()
				r.err = ctx.Err()
				return
			}
			g.mu.Unlock()
			<-r.done
		}
		if r.batch == nil {
			return // written by another
		}
	} else {
		g.writing = true
		g.mu.Unlock()
		r.batch = []*serialInsert{r}
	}
	written := false
	defer func() {
		// Even when the write panicked: the others waiting for it are
		// told, and the next group is handed on.
		if !written {
			for _, o := range r.batch {
				o.id, o.claimed, o.err = 0, false, errors.New("enqueue: the grouped insert did not finish")
			}
		}
		g.handOn(r.batch)
	}()
	db.writeInserts(r.batch)
	written = true
}

// handOn ends the write of batch: its waiting members learn their
// outcome and the first of the inserts queued meanwhile writes the next
// group (or none is being written any more).
func (g *insertGroup) handOn(batch []*serialInsert) {
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
// it was written and each is tried on its own, under its own context,
// so one bad insert fails only its own enqueue.
func (db *DB) writeInserts(batch []*serialInsert) {
	one := func(r *serialInsert) {
		r.id, r.claimed = 0, false
		r.err = db.w.QueryRowContext(r.ctx, insertSerialQuery, r.args...).Scan(&r.id, &r.claimed)
	}
	if len(batch) == 1 {
		one(batch[0])
		return
	}
	ctx := context.WithoutCancel(batch[0].ctx)
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
			one(r)
		}
	}
}
