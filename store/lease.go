package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// The queue for many claimers: one design on both engines.
//
// A claim is a lease. The item's row records the claimer (holder), a
// fencing token (lease, bumped by every claim) and when the lease ends
// (lease_until); the claimer renews it while it works. Renewing,
// finishing, retrying, deferring and releasing name the token and change
// nothing when the claim no longer holds the item (core.ErrLeaseLost).
//
// queue_heads holds one row per conversation with unfinished work: its
// oldest unfinished item (head), whether that runs, and due — when the
// head may be claimed (its not_before) or, while it runs, when its lease
// ends. A claim takes the due heads, oldest first: a queued head that is
// due, or a running one whose lease ran out, which is taken back and
// counted as an interruption (the poison-message guard reads it). Only a
// head runs, so a conversation's items run one at a time, in id order,
// whichever replica claims them. On PostgreSQL the heads are claimed with
// FOR UPDATE SKIP LOCKED, so claimers never wait for one another; an
// enqueue and a finish of one conversation take its advisory lock
// (lockConversation); and every transaction that changes a head locks its
// row before the item's row, the order the claim follows, so none of
// them can deadlock.

// forever is the due time of a lease that does not expire (LeaseTTL 0).
const forever = int64(1) << 62

// leaseEnd is when a lease taken or renewed at now ends.
func (db *DB) leaseEnd(now time.Time) int64 {
	if db.leaseTTL <= 0 {
		return forever
	}
	return now.Add(db.leaseTTL).UnixMilli()
}

// interruptedBy is the last error of an item whose lease ran out.
const interruptedBy = "interrupted: its claim ran out (the process stopped or hung)"

// Claim implements core.QueueStore: it claims up to n due heads (see
// above) and returns them with their lease tokens; next is the earliest
// time a head not due yet becomes due (a retry's or deferral's time, or a
// running item's lease end), zero when none.
func (db *DB) Claim(ctx context.Context, n int, now time.Time) ([]core.QueueItem, time.Time, error) {
	nowMS := now.UnixMilli()
	if err := db.takeBackOnce(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
	}
	if n > 0 && !db.d.concurrent {
		// Most calls find nothing due: SQLite looks on the read pool
		// first, without taking the write lock.
		var one int
		if err := db.r.QueryRowContext(ctx, `SELECT 1 FROM queue_heads WHERE due <= ? LIMIT 1`, nowMS).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			n = 0
		} else if err != nil {
			return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
		}
	}
	var items []core.QueueItem
	var bad []unreadable
	if n > 0 {
		err := db.txLocking(ctx, func(tx *txn) error {
			items, bad = items[:0], bad[:0]
			type head struct {
				conv string
				id   int64
			}
			var heads []head
			rows, err := tx.QueryContext(ctx, `SELECT conversation, head FROM queue_heads WHERE due <= ? ORDER BY head LIMIT ?`+db.d.skipLocked, nowMS, n)
			if err != nil {
				return err
			}
			for rows.Next() {
				var h head
				if err := rows.Scan(&h.conv, &h.id); err != nil {
					rows.Close()
					return err
				}
				heads = append(heads, h)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			until := db.leaseEnd(now)
			for _, h := range heads {
				it, err := db.claimRow(ctx, tx, h.id, until)
				if errors.Is(err, sql.ErrNoRows) {
					// The head names an item already finished: move on.
					if err := db.advanceHead(ctx, tx, h.conv); err != nil {
						return err
					}
					continue
				}
				var u unreadable
				if errors.As(err, &u) {
					// One unreadable row must not stall the queue: it fails
					// and the conversation moves on.
					if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = 'failed', attempts = attempts + 1, last_error = ?, holder = '', lease_until = 0, updated_at = ? WHERE id = ?`,
						"the stored event cannot be read: "+u.err.Error(), db.ms(), u.id); err != nil {
						return err
					}
					if err := db.advanceHead(ctx, tx, h.conv); err != nil {
						return err
					}
					bad = append(bad, u)
					continue
				}
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE queue_heads SET running = TRUE, due = ? WHERE conversation = ?`, until, h.conv); err != nil {
					return err
				}
				items = append(items, it)
			}
			return nil
		})
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
		}
	}
	for _, b := range bad {
		db.log.Error("queue row cannot be read; marked failed", "request", b.id, "err", b.err)
	}
	var due sql.NullInt64
	if err := db.r.QueryRowContext(ctx, `SELECT MIN(due) FROM queue_heads WHERE due > ? AND due < ?`, nowMS, forever).Scan(&due); err != nil {
		return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
	}
	var next time.Time
	if due.Valid {
		next = time.UnixMilli(due.Int64)
	}
	if len(bad) > 0 {
		// The next item of each such conversation is due at once.
		next = now
	}
	return items, next, nil
}

// unreadable is a queue row whose event cannot be decoded.
type unreadable struct {
	id  int64
	err error
}

func (u unreadable) Error() string { return fmt.Sprintf("queue row %d: %v", u.id, u.err) }

// claimRow marks the head item id running under a new lease of this
// holder until until and returns it. A row still running (its lease ran
// out) is taken back: an interruption. sql.ErrNoRows: the item is
// finished; an unreadable: its event cannot be decoded.
func (db *DB) claimRow(ctx context.Context, tx *txn, id, until int64) (core.QueueItem, error) {
	var it core.QueueItem
	var kind, conv, raw string
	var notBefore, created int64
	err := tx.QueryRowContext(ctx, `UPDATE queue SET status = 'running', holder = ?, lease = lease + 1, lease_until = ?, updated_at = ?,
		interruptions = interruptions + CASE WHEN status = 'running' THEN 1 ELSE 0 END,
		last_error = CASE WHEN status = 'running' THEN ? ELSE last_error END
		WHERE id = ? AND status IN ('queued', 'running')
		RETURNING id, kind, conversation, dedupe_key, payload, attempts, interruptions, notified, not_before, created_at, lease`,
		db.holder, until, db.ms(), interruptedBy, id).
		Scan(&it.ID, &kind, &conv, &it.DedupeKey, &raw, &it.Attempts, &it.Interruptions, &it.Notified, &notBefore, &created, &it.Lease)
	if err != nil {
		return it, err
	}
	var p payload
	if err := decodePayload(core.EventKind(kind), raw, &p); err != nil {
		return it, unreadable{it.ID, err}
	}
	it.Kind, it.Conversation = core.EventKind(kind), core.ParseConversationKey(conv)
	it.Message, it.Reaction, it.Firing = p.Message, p.Reaction, p.Firing
	it.NotBefore, it.CreatedAt = time.UnixMilli(notBefore), time.UnixMilli(created)
	return it, nil
}

// advanceHead makes the conversation's oldest unfinished item its head,
// due at its not_before, or deletes the head when nothing is left.
func (db *DB) advanceHead(ctx context.Context, tx *txn, conv string) error {
	var id, notBefore int64
	err := tx.QueryRowContext(ctx, `SELECT id, not_before FROM queue WHERE conversation = ? AND status IN ('queued', 'running') ORDER BY id LIMIT 1`, conv).Scan(&id, &notBefore)
	if errors.Is(err, sql.ErrNoRows) {
		_, err = tx.ExecContext(ctx, `DELETE FROM queue_heads WHERE conversation = ?`, conv)
		return err
	}
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE queue_heads SET head = ?, running = FALSE, due = ? WHERE conversation = ?`, id, notBefore, conv)
	return err
}

// takeBackOnce, on a sole claimer's first claim, makes every running
// head due: their leases belong to processes that died (nothing else
// claims while this one holds the data directory), so a restart answers
// what a crash interrupted at once instead of after the lease.
func (db *DB) takeBackOnce(ctx context.Context) error {
	if !db.sole {
		return nil
	}
	db.tookBackMu.Lock()
	defer db.tookBackMu.Unlock()
	if db.tookBack {
		return nil
	}
	if _, err := db.w.ExecContext(ctx, `UPDATE queue_heads SET due = 0 WHERE running = TRUE`); err != nil {
		return err
	}
	db.tookBack = true
	return nil
}

// Renew implements core.QueueStore: it extends the lease of a claimed
// item by the lease TTL from now; core.ErrLeaseLost when the claim no
// longer holds it.
func (db *DB) Renew(ctx context.Context, id, lease int64) error {
	until := db.leaseEnd(db.now())
	err := db.txLocking(ctx, func(tx *txn) error {
		var conv string
		if err := tx.QueryRowContext(ctx, `SELECT conversation FROM queue WHERE id = ?`, id).Scan(&conv); err != nil {
			return err
		}
		if err := affected(tx.ExecContext(ctx, `UPDATE queue_heads SET due = ? WHERE conversation = ? AND head = ? AND running = TRUE`, until, conv, id)); err != nil {
			return err
		}
		return affected(tx.ExecContext(ctx, `UPDATE queue SET lease_until = ? WHERE id = ? AND holder = ? AND lease = ? AND status = 'running'`, until, id, db.holder, lease))
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = core.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("renew the lease of queue item %d: %w", id, err)
	}
	return nil
}

// affected turns an update that changed no row into core.ErrLeaseLost.
func affected(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return core.ErrLeaseLost
	}
	return nil
}

// settle ends a claim in one transaction: it releases the head (due at
// due, or at the item's not_before when due < 0), applies set to the item
// if the claim still holds it, and, when finish is set, moves the head to
// the conversation's next item.
func (db *DB) settle(ctx context.Context, id, lease int64, finish bool, due int64, set string, args ...any) error {
	err := db.txLocking(ctx, func(tx *txn) error {
		var conv string
		var notBefore int64
		if err := tx.QueryRowContext(ctx, `SELECT conversation, not_before FROM queue WHERE id = ?`, id).Scan(&conv, &notBefore); err != nil {
			return err
		}
		if finish {
			if err := db.lockConversation(ctx, tx, conv); err != nil {
				return err
			}
		}
		if due < 0 {
			due = notBefore
		}
		if err := affected(tx.ExecContext(ctx, `UPDATE queue_heads SET running = FALSE, due = ? WHERE conversation = ? AND head = ? AND running = TRUE`, due, conv, id)); err != nil {
			return err
		}
		a := append(append([]any{}, args...), db.ms(), id, db.holder, lease)
		if err := affected(tx.ExecContext(ctx, `UPDATE queue SET `+set+`, holder = '', lease_until = 0, updated_at = ? WHERE id = ? AND holder = ? AND lease = ? AND status = 'running'`, a...)); err != nil {
			return err
		}
		if finish {
			return db.advanceHead(ctx, tx, conv)
		}
		return nil
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = core.ErrLeaseLost
	}
	return err
}

// Finish implements core.QueueStore.
func (db *DB) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	if status != core.StatusDone && status != core.StatusFailed {
		return core.Errorf(core.KindInvalid, "finish queue item %d: status %q is not done or failed", id, status)
	}
	if err := db.settle(ctx, id, lease, true, 0, `status = ?, attempts = attempts + 1, last_error = ?`, status, cause); err != nil {
		return fmt.Errorf("finish queue item %d: %w", id, err)
	}
	return nil
}

// Retry implements core.QueueStore.
func (db *DB) Retry(ctx context.Context, id, lease int64, notBefore time.Time, cause string) error {
	nb := notBefore.UnixMilli()
	if err := db.settle(ctx, id, lease, false, nb, `status = 'queued', attempts = attempts + 1, not_before = ?, last_error = ?`, nb, cause); err != nil {
		return fmt.Errorf("retry queue item %d: %w", id, err)
	}
	return nil
}

// Defer implements core.QueueStore.
func (db *DB) Defer(ctx context.Context, id, lease int64, notBefore time.Time, cause string, notified bool) error {
	nb := notBefore.UnixMilli()
	if err := db.settle(ctx, id, lease, false, nb, `status = 'queued', not_before = ?, last_error = ?, notified = (notified OR ?)`, nb, cause, notified); err != nil {
		return fmt.Errorf("defer queue item %d: %w", id, err)
	}
	return nil
}

// Release implements core.QueueStore.
func (db *DB) Release(ctx context.Context, id, lease int64) error {
	if err := db.settle(ctx, id, lease, false, -1, `status = 'queued'`); err != nil {
		return fmt.Errorf("release queue item %d: %w", id, err)
	}
	return nil
}

// QueueHealth is what doctor and the metrics read of the leased queue.
type QueueHealth struct {
	// Heads counts the conversations with unfinished work; Running those
	// whose head is claimed; Expired the claims whose lease ran out and
	// that no claimer has taken back yet.
	Heads, Running, Expired int
	// Holders counts the claimers holding leases.
	Holders int
	// Orphans counts unfinished items of conversations without a head:
	// nothing would ever claim them (0 unless the queue is broken).
	Orphans int
}

// QueueHealth reads the state of the leased queue at now.
func (db *DB) QueueHealth(ctx context.Context, now time.Time) (QueueHealth, error) {
	var h QueueHealth
	err := db.r.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CASE WHEN running = TRUE THEN 1 END), COUNT(CASE WHEN running = TRUE AND due <= ? THEN 1 END) FROM queue_heads`,
		now.UnixMilli()).Scan(&h.Heads, &h.Running, &h.Expired)
	if err == nil {
		err = db.r.QueryRowContext(ctx, `SELECT COUNT(DISTINCT holder) FROM queue WHERE status = 'running'`).Scan(&h.Holders)
	}
	if err == nil {
		err = db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM queue q WHERE q.status IN ('queued', 'running')
			AND NOT EXISTS (SELECT 1 FROM queue_heads h WHERE h.conversation = q.conversation)`).Scan(&h.Orphans)
	}
	if err != nil {
		return h, fmt.Errorf("queue health: %w", err)
	}
	return h, nil
}

// RequeueRunning implements core.QueueStore: it makes every running
// item due now (its next claim takes it back as an interruption) and
// prunes finished rows past Options.QueueRetention. It returns how many
// items were running.
func (db *DB) RequeueRunning(ctx context.Context) (int, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE queue_heads SET due = 0 WHERE running = TRUE`)
	if err != nil {
		return 0, fmt.Errorf("requeue running: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := db.PruneQueue(ctx); err != nil {
		return int(n), err
	}
	return int(n), nil
}

// Running implements core.QueueStore: the lease token of every running
// item, by id.
func (db *DB) Running(ctx context.Context) (map[int64]int64, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, lease FROM queue WHERE status = 'running' ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("running queue items: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, lease int64
		if err := rows.Scan(&id, &lease); err != nil {
			return nil, err
		}
		out[id] = lease
	}
	return out, rows.Err()
}

// MostRunningInOneConversation returns the conversation with the most
// running items and how many (for tests and doctor: more than one breaks
// the per-conversation order).
func (db *DB) MostRunningInOneConversation(ctx context.Context) (string, int, error) {
	var conv string
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT conversation, COUNT(*) FROM queue WHERE status = 'running' GROUP BY conversation ORDER BY COUNT(*) DESC LIMIT 1`).Scan(&conv, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil
	}
	return conv, n, err
}

// OrderAt reports, for a claimed item, how many older items of its
// conversation are not done yet and how many newer ones were claimed or
// finished already: both are 0 when the conversation runs in order (for
// tests of the order across claimers).
func (db *DB) OrderAt(ctx context.Context, id int64) (olderOpen, newerStarted int, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT COUNT(CASE WHEN q.id < ? AND q.status <> 'done' THEN 1 END), COUNT(CASE WHEN q.id > ? AND q.status IN ('running', 'done') THEN 1 END)
		FROM queue q WHERE q.conversation = (SELECT conversation FROM queue WHERE id = ?)`, id, id, id).Scan(&olderOpen, &newerStarted)
	return olderOpen, newerStarted, err
}
