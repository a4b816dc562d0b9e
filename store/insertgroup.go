package store

import (
	"context"
	"database/sql"
	"errors"
)

// Enqueues that arrive together (a getUpdates batch's chats, each on its
// own goroutine) would each be a transaction of its own on the single
// SQLite writer, one behind the other, each writing the queue's pages
// and committing again. insertGroup lets the first one write alone and
// queues those that come meanwhile; when it is done, the first of them
// writes all that queued, in one transaction. A lone enqueue is one
// statement, as before, and waits for nothing.

// insertGroup is the state of the grouped SQLite enqueues.
type insertGroup = writeQueue[*serialInsert]

// serialInsert is one enqueue's insert: its statement's arguments
// (insertSerialArgs) and, once written, what it returned.
type serialInsert struct {
	writeSlot[*serialInsert]
	ctx     context.Context
	args    []any
	id      int64
	claimed bool
	err     error // sql.ErrNoRows: not inserted (a duplicate, or full)
}

// insertGrouped writes r, alone or in a group with the inserts that
// queued while another group was written. A caller whose context ends
// while it waits gives up unless its insert was already taken into a
// group being written (its outcome is then waited for: it may commit).
func (db *DB) insertGrouped(ctx context.Context, r *serialInsert) {
	r.ctx = ctx
	batch, err := db.inserts.join(ctx, r)
	if err != nil {
		r.err = err
		return
	}
	if batch == nil {
		return // written by another
	}
	written := false
	defer func() {
		// Even when the write panicked: the others waiting for it are
		// told, and the next group is handed on.
		if !written {
			for _, o := range batch {
				o.id, o.claimed, o.err = 0, false, errors.New("enqueue: the grouped insert did not finish")
			}
		}
		db.inserts.handOn(batch, 0)
	}()
	db.writeInserts(batch)
	written = true
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
