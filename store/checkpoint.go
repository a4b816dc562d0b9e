package store

import (
	"context"
	"sync/atomic"
)

// SQLite in WAL mode appends every commit to the write-ahead log and, by
// default, copies the log back into the database file (a checkpoint)
// inside the commit that takes the log past 1,000 pages: that commit,
// and every write queued behind it on the single writer, waits while
// the pages are written and the log and the database file are flushed.
// Under load that is a stall every few dozen messages, which is most of
// the added latency's tail. The writer's own checkpoint is therefore
// moved to a backstop (walBackstopPages) and a background goroutine
// copies the log with a PASSIVE checkpoint, which runs beside the
// writer and the readers, on a reader connection, after every
// ckptEvery write transactions. SQLite starts a log over (writes it from
// its beginning again) only after a checkpoint copied all of it, which
// one running beside a steady writer never does, so the background pass
// ends with a second, short one on the writer's connection: it copies
// what was appended meanwhile with no write in between, and the next
// write starts the log over. journalSizeLimit then trims a log that grew
// larger.

const (
	// ckptEvery is how many write transactions the background
	// checkpoint waits for: a plain message writes three of about ten
	// pages each, so the log stays near the 1,000 pages SQLite would
	// let it reach.
	ckptEvery = 96
	// walBackstopPages is the writer's own checkpoint threshold, met only
	// when the background one cannot keep up or is not running.
	walBackstopPages = 8000
	// journalSizeLimit is the size, in bytes, a log that is started over
	// is cut back to.
	journalSizeLimit = 8 << 20
)

// checkpointer is the background checkpoint's state.
type checkpointer struct {
	writes atomic.Int64 // write transactions since the last checkpoint
	wake   chan struct{}
	stop   context.CancelFunc
	done   chan struct{}
}

// wrote counts a write transaction and wakes the checkpoint when it is
// due. Safe on a nil checkpointer (PostgreSQL).
func (c *checkpointer) wrote() {
	if c == nil || c.writes.Add(1) < ckptEvery {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// startCheckpoints starts the background checkpoint of a SQLite DB.
func (db *DB) startCheckpoints() {
	ctx, stop := context.WithCancel(context.Background())
	c := &checkpointer{wake: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	db.trips.ckpt.Store(c)
	go func() {
		defer close(c.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			}
			c.writes.Store(0)
			if err := db.checkpoint(ctx); err != nil && ctx.Err() == nil {
				db.log.Warn("background checkpoint of the write-ahead log failed; the writer will do it", "err", err)
			}
		}
	}()
}

// stopCheckpoints stops the background checkpoint and waits for it.
func (db *DB) stopCheckpoints() {
	c := db.trips.ckpt.Swap(nil)
	if c == nil {
		return
	}
	c.stop()
	<-c.done
}

// checkpoint copies the write-ahead log into the database file: the bulk
// on a reader connection, beside the writer and the readers, then what
// was appended meanwhile on the writer's connection, which waits for the
// writes in progress and holds the next ones only for that remainder
// (copied, and flushed with the database file). It is housekeeping, not
// counted in the store's round trips.
func (db *DB) checkpoint(ctx context.Context) error {
	var busy, logged, copied int
	if err := db.r.DB.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logged, &copied); err != nil {
		return err
	}
	return db.w.DB.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logged, &copied)
}
