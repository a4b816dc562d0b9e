package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
// oldest unfinished item (head) and when that may be claimed (due, its
// not_before); whether it runs, and until when, is the item's own row.
// Triggers on queue keep the table (migration 120), so every write to an
// item is one statement and a claim or renewal writes the item only. A
// claim takes the due heads, oldest first: a queued head that is due, or
// a running one whose lease ran out, which is taken back and counted as
// an interruption (the poison-message guard reads it). Only a head runs,
// so a conversation's items run one at a time, in id order, whichever
// replica claims them; a claim reads one row per busy conversation,
// never every pending row.
//
// SQLite has one writer at a time, so each write is a statement on its
// own. On PostgreSQL the heads are claimed with FOR UPDATE SKIP LOCKED, so
// claimers never wait for one another; an enqueue and a finish (failing
// an unreadable item included) take the conversation's advisory lock
// (convLockSpace: ids of one conversation commit in order, and a head is
// never dropped under an enqueue); and whatever writes an item locks its
// head row first, the order the claim follows, so none of them can
// deadlock.

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
// running item's lease end), zero when none or when n items were claimed.
// On PostgreSQL next is read before the claim: a head found due there
// that another replica claimed first is not in it (its lease end is
// found by the next call; the dispatcher calls again on every
// notification and at least every two seconds).
func (db *DB) Claim(ctx context.Context, n int, now time.Time) ([]core.QueueItem, time.Time, error) {
	if err := db.takeBackOnce(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
	}
	var items []core.QueueItem
	var bad []unreadable
	var next int64
	var err error
	if db.d.concurrent {
		items, bad, next, err = db.claimLocked(ctx, n, now)
	} else {
		items, bad, next, err = db.claimSerial(ctx, n, now)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
	}
	for _, b := range bad {
		db.log.Error("queue row cannot be read; marked failed", "request", b.id, "err", b.err)
	}
	var nx time.Time
	switch {
	case len(bad) > 0:
		// The next item of each such conversation is due at once.
		nx = now
	case next > 0 && next < forever:
		nx = time.UnixMilli(next)
	}
	return items, nx, nil
}

// headsDue selects every head with the time it can be claimed: a queued
// head at its not_before, a running one when its lease ends.
const headsDue = `SELECT h.head, CASE WHEN q.status = 'running' THEN q.lease_until ELSE h.due END AS d
	FROM queue_heads h JOIN queue q ON q.id = h.head`

// claimSerial claims on SQLite: one read of the heads (on the writer's
// connection, whose cache is warm: DB.hot; most calls find nothing due
// and write nothing), then one
// statement per item in an immediate transaction (measured faster than
// the same statements each in an autocommit); each re-checks that the
// item is still claimable, so a stale read claims nothing it should not.
func (db *DB) claimSerial(ctx context.Context, n int, now time.Time) (items []core.QueueItem, bad []unreadable, next int64, err error) {
	nowMS := now.UnixMilli()
	rows, err := db.hot.QueryContext(ctx, headsDue)
	if err != nil {
		return nil, nil, 0, err
	}
	var heads []int64
	for rows.Next() {
		var head, due int64
		if err := rows.Scan(&head, &due); err != nil {
			rows.Close()
			return nil, nil, 0, err
		}
		switch {
		case due <= nowMS:
			heads = append(heads, head)
		case due < forever && (next == 0 || due < next):
			next = due
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, 0, err
	}
	// The oldest heads first.
	slices.Sort(heads)
	if len(heads) > n {
		heads = heads[:max(n, 0)]
	}
	if len(heads) == 0 {
		return nil, nil, next, nil
	}
	until := db.leaseEnd(now)
	err = db.tx(ctx, func(tx *txn) error {
		items, bad = items[:0], bad[:0]
		for _, id := range heads {
			it, err := db.claimRow(ctx, tx, id, nowMS, until)
			if err != nil {
				var u unreadable
				if errors.As(err, &u) {
					if err := db.failUnreadable(ctx, tx, u); err != nil {
						return err
					}
					bad = append(bad, u)
					continue
				}
				if errors.Is(err, sql.ErrNoRows) {
					continue // claimed or settled meanwhile
				}
				return err
			}
			items = append(items, it)
		}
		return nil
	})
	return items, bad, next, err
}

// claimLocked claims on PostgreSQL. One read comes first: how many
// heads are due, and when the next one not due yet will be. Most calls
// find nothing due — every replica is woken by each new head, and its
// own wake-ups after an enqueue or a finish mostly find the work taken —
// and cost that read alone. When some are due, one statement (a round
// trip, and a transaction of its own; claimQuery) locks them FOR UPDATE
// SKIP LOCKED (a head another claimer is claiming is skipped, never
// waited for) and claims their items.
func (db *DB) claimLocked(ctx context.Context, n int, now time.Time) (items []core.QueueItem, bad []unreadable, next int64, err error) {
	nowMS := now.UnixMilli()
	var due int
	heads, args := headsDue, []any{nowMS, nowMS, forever}
	scope, scopeArgs := db.claimScope(now)
	if scope != "" {
		heads += ` WHERE ` + scope
		args = append(args, scopeArgs...)
	}
	if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FILTER (WHERE d <= ?), COALESCE(MIN(d) FILTER (WHERE d > ? AND d < ?), 0) FROM (`+heads+`) x`,
		args...).Scan(&due, &next); err != nil {
		return nil, nil, 0, err
	}
	if n > 0 && due > 0 {
		err = db.retried(ctx, func() error {
			items, bad = items[:0], bad[:0]
			args := append([]any{nowMS, nowMS}, scopeArgs...)
			args = append(args, db.holder, db.leaseEnd(now), db.ms(), interruptedBy, nowMS, nowMS)
			rows, err := db.w.QueryContext(ctx, claimQuery(n, scope), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				it, err := scanClaimed(rows.Scan)
				var u unreadable
				switch {
				case errors.As(err, &u):
					bad = append(bad, u)
				case err != nil:
					return err
				default:
					items = append(items, it)
				}
			}
			return rows.Err()
		})
		if err != nil {
			return nil, nil, 0, err
		}
		// Claimed under this holder's new lease, and failed now as a
		// finish is (queue_finish: the conversation's lock, then its head
		// row, then the item, only while the lease holds), so a claim or
		// an enqueue meanwhile neither deadlocks with it nor loses its
		// head. One that cannot be failed now is taken back when the
		// lease ends, an interruption; the items claimed are run anyway.
		failed := bad[:0]
		for _, u := range bad {
			if err := db.finishCalled(ctx, u.id, u.lease, core.StatusFailed, unreadableCause(u), nil); err != nil {
				db.log.Error("queue row cannot be read and could not be marked failed; it is claimed again when its lease ends", "request", u.id, "err", err)
				continue
			}
			failed = append(failed, u)
		}
		bad = failed
		// Claimed items come out in no particular order: the oldest first.
		slices.SortFunc(items, func(a, b core.QueueItem) int { return cmp.Compare(a.ID, b.ID) })
	}
	if n > 0 && len(items) == n {
		next = 0 // a full claim: the caller claims again when a slot is free
	}
	return items, bad, next, nil
}

// claimQuery is PostgreSQL's claim of up to n due heads: the heads
// locked FOR UPDATE SKIP LOCKED, oldest first, and their items made
// running under a new lease of this holder, each only if still claimable
// (claimRow's update, whose RETURNING it shares), in one statement. It
// commits without waiting for the disk (synchronous_commit off for its
// transaction): lost with a crash of the server, an item is simply
// claimable again, as on SQLite with synchronous=NORMAL, where only an
// enqueue is flushed. Its arguments: now twice; those of scope (see
// claimScope; "" when none); the holder, the lease's end, the time of
// the update, the interruption's cause, now twice.
func claimQuery(n int, scope string) string {
	where := `(q.status = 'queued' AND h.due <= ? OR q.status = 'running' AND q.lease_until <= ?)`
	if scope != "" {
		where += ` AND ` + scope
	}
	return `WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
	heads AS (SELECT h.head FROM async, queue_heads h JOIN queue q ON q.id = h.head
		WHERE ` + where + `
		ORDER BY h.head LIMIT ` + strconv.Itoa(n) + ` FOR UPDATE OF h SKIP LOCKED)
	UPDATE queue SET ` + claimSet + `
	FROM heads WHERE queue.id = heads.head AND ` + claimableWhere + `
	RETURNING ` + claimedCols
}

// claimScope is the condition, on a head (queue_heads h) and its item
// (queue q), that leaves out of this replica's claims at now what it
// cannot answer, with its arguments ("" when it claims everything): the
// local channel's conversations of other processes (Options.Local,
// notOthersLocal), and the items of channels it does not run
// (Options.Channels) until they have waited channelWait.
func (db *DB) claimScope(now time.Time) (string, []any) {
	var conds []string
	var args []any
	if db.local.Channel != "" {
		conds = append(conds, notOthersLocal)
		args = append(args, db.local.args()...)
	}
	if db.channels != nil {
		c := `(`
		for _, ch := range db.channels {
			c += `starts_with(h.conversation, ?) OR `
			args = append(args, ch+":")
		}
		conds = append(conds, c+`q.created_at <= ?)`)
		args = append(args, now.Add(-db.channelWait).UnixMilli())
	}
	return strings.Join(conds, ` AND `), args
}

// notOthersLocal leaves out the heads of the local channel's
// conversations (Options.Local) but this process's own and, when it
// takes them, those without a thread (no ':' after the chat); its
// arguments: LocalConversation.args.
const notOthersLocal = `(NOT starts_with(h.conversation, ?) OR h.conversation = ?
	OR (? AND strpos(substr(h.conversation, ?), ':') = 0))`

// claimSet, claimableWhere and claimedCols are a claim's update of an
// item (holder, lease end, time, interruption cause), the condition that
// it is claimable (now twice), and what it returns (scanClaimed).
const (
	claimSet = `status = 'running', holder = ?, lease = lease + 1, lease_until = ?, updated_at = ?, waiting = false,
		interruptions = interruptions + CASE WHEN status = 'running' AND NOT waiting THEN 1 ELSE 0 END,
		last_error = CASE WHEN status = 'running' THEN ? ELSE last_error END`
	claimableWhere = `(queue.status = 'queued' AND queue.not_before <= ? OR queue.status = 'running' AND queue.lease_until <= ?)`
	claimedCols    = `queue.id, queue.kind, queue.conversation, queue.dedupe_key, queue.payload, queue.attempts, queue.interruptions, queue.notified, queue.not_before, queue.created_at, queue.lease,
		NOT EXISTS (SELECT 1 FROM replies r WHERE r.request_id = queue.id)`
)

// unreadable is a queue row whose event cannot be decoded.
type unreadable struct {
	id    int64
	lease int64 // the claim's
	err   error
}

func (u unreadable) Error() string { return fmt.Sprintf("queue row %d: %v", u.id, u.err) }

// execer is a pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// claimRow marks item id running under a new lease of this holder until
// until and returns it, if it is still claimable at now: queued and due,
// or running under a lease that ran out (taken back: an interruption).
// sql.ErrNoRows: it is not; an unreadable: its event cannot be decoded.
func (db *DB) claimRow(ctx context.Context, x execer, id, now, until int64) (core.QueueItem, error) {
	return scanClaimed(x.QueryRowContext(ctx, `UPDATE queue SET `+claimSet+` WHERE queue.id = ? AND `+claimableWhere+` RETURNING `+claimedCols,
		db.holder, until, db.ms(), interruptedBy, id, now, now).Scan)
}

// asideWhere is ClaimAside's condition beyond claimableWhere: the
// conversation's head, when it is another item, neither runs nor is due
// (at the argument); the items between them wait behind it.
const asideWhere = ` AND NOT EXISTS (SELECT 1 FROM queue_heads h JOIN queue e ON e.id = h.head
		WHERE h.conversation = queue.conversation AND h.head <> queue.id AND (e.status = 'running' OR h.due <= ?))`

// ClaimAside implements core.AsideClaimer: it claims item id under a
// new lease of this holder, as Claim would a head, when it is claimable
// and every earlier unfinished item of its conversation waits: the head
// is queued and not due at now. The item's Behind says how many wait and
// when the head is due. On PostgreSQL the conversation's head row is
// locked first, the order a claim follows.
func (db *DB) ClaimAside(ctx context.Context, id int64, now time.Time) (core.QueueItem, bool, error) {
	nowMS := now.UnixMilli()
	q := `UPDATE queue SET ` + claimSet + ` WHERE queue.id = ? AND ` + claimableWhere + asideWhere + ` RETURNING ` + claimedCols
	args := []any{db.holder, db.leaseEnd(now), db.ms(), interruptedBy, id, nowMS, nowMS, nowMS}
	var it core.QueueItem
	var err error
	if !db.d.concurrent {
		it, err = scanClaimed(db.w.QueryRowContext(ctx, q, args...).Scan)
	} else {
		err = db.txLocking(ctx, func(tx *txn) error {
			var head int64
			if err := tx.QueryRowContext(ctx, `SELECT h.head FROM queue_heads h JOIN queue q ON q.conversation = h.conversation WHERE q.id = ?`+db.d.forUpdate+` OF h`, id).Scan(&head); err != nil {
				return err
			}
			it, err = scanClaimed(tx.QueryRowContext(ctx, q, args...).Scan)
			return err
		})
	}
	var u unreadable
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return core.QueueItem{}, false, nil
	case errors.As(err, &u):
		// Left to the claim in order, which fails it (PostgreSQL's
		// transaction claimed nothing).
		if db.d.concurrent {
			return core.QueueItem{}, false, nil
		}
		if rerr := db.Release(ctx, u.id, u.lease); rerr != nil {
			return core.QueueItem{}, false, fmt.Errorf("claim queue item %d aside: %w (and put back: %w)", id, err, rerr)
		}
		return core.QueueItem{}, false, nil
	case err != nil:
		return core.QueueItem{}, false, fmt.Errorf("claim queue item %d aside: %w", id, err)
	}
	// The head before it, and how many queued items wait behind that
	// head up to it (none: it was the head itself).
	b := &core.Behind{}
	var next int64
	conv := it.Conversation.String()
	err = db.r.QueryRowContext(ctx, `SELECT h.head, h.due, (SELECT COUNT(*) FROM queue WHERE conversation = h.conversation AND id < ? AND status = 'queued')
		FROM queue_heads h WHERE h.conversation = ? AND h.head < ?`, id, conv, id).Scan(&b.Head, &next, &b.Waiting)
	switch {
	case err == nil:
		b.Next = time.UnixMilli(next)
	case !errors.Is(err, sql.ErrNoRows):
		db.log.Warn("read what an aside command waits beside", "request", id, "err", err)
	}
	it.Behind = b
	return it, true, nil
}

// scanClaimed reads a claimed item (claimedCols) with scan; an unreadable
// error when its event cannot be decoded.
func scanClaimed(scan func(...any) error) (core.QueueItem, error) {
	var it core.QueueItem
	var kind, conv, raw string
	var notBefore, created int64
	if err := scan(&it.ID, &kind, &conv, &it.DedupeKey, &raw, &it.Attempts, &it.Interruptions, &it.Notified, &notBefore, &created, &it.Lease, &it.NoReply); err != nil {
		return it, err
	}
	var p payload
	if err := decodePayload(core.EventKind(kind), raw, &p); err != nil {
		return it, unreadable{it.ID, it.Lease, err}
	}
	it.Kind, it.Conversation = core.EventKind(kind), core.ParseConversationKey(conv)
	it.Message, it.Reaction, it.Firing = p.Message, p.Reaction, p.Firing
	it.NotBefore, it.CreatedAt = time.UnixMilli(notBefore), time.UnixMilli(created)
	return it, nil
}

// failUnreadable fails an item whose event cannot be decoded: one such
// row must not stall the queue, its conversation moves on. SQLite's
// claim does it in its transaction; PostgreSQL's fails it as a finish
// (claimLocked).
func (db *DB) failUnreadable(ctx context.Context, x execer, u unreadable) error {
	_, err := x.ExecContext(ctx, `UPDATE queue SET status = 'failed', attempts = attempts + 1, last_error = ?, holder = '', lease_until = 0, updated_at = ? WHERE id = ?`,
		core.CleanText(unreadableCause(u)), db.ms(), u.id)
	return err
}

// unreadableCause is the recorded error of an unreadable item.
func unreadableCause(u unreadable) string {
	return "the stored event cannot be read: " + u.err.Error()
}

// takeBackOnce, on a sole claimer's first claim, ends every lease: they
// belong to processes that died (nothing else claims while this one holds
// the data directory), so a restart answers what a crash interrupted at
// once instead of after the lease.
func (db *DB) takeBackOnce(ctx context.Context) error {
	if !db.sole {
		return nil
	}
	db.tookBackMu.Lock()
	defer db.tookBackMu.Unlock()
	if db.tookBack {
		return nil
	}
	if _, err := db.w.ExecContext(ctx, `UPDATE queue SET lease_until = 0 WHERE status = 'running'`); err != nil {
		return err
	}
	db.tookBack = true
	return nil
}

// Renew implements core.QueueStore: it extends the lease of a claimed
// item by the lease TTL from now; core.ErrLeaseLost when the claim no
// longer holds it.
func (db *DB) Renew(ctx context.Context, id, lease int64) error {
	if err := db.fenced(ctx, id, lease, `lease_until = ?`, db.leaseEnd(db.now())); err != nil {
		return fmt.Errorf("renew the lease of queue item %d: %w", id, err)
	}
	return nil
}

// NotInterrupted takes back the interruption a claim counted when it
// took back an item whose work was still under way in the claimer's own
// process (the gateway hands that work the new lease): the work was
// never cut short, and repeated outages of the database must not add up
// against the message (the poison-message guard). core.ErrLeaseLost when
// the claim no longer holds it.
func (db *DB) NotInterrupted(ctx context.Context, id, lease int64) error {
	if err := db.fenced(ctx, id, lease, `interruptions = CASE WHEN interruptions > 0 THEN interruptions - 1 ELSE 0 END`); err != nil {
		return fmt.Errorf("take back the interruption of queue item %d: %w", id, err)
	}
	return nil
}

var _ core.WaitMarker = (*DB)(nil)

// MarkWaiting implements core.WaitMarker: it records whether the
// claimed item only waits. A claim that takes it back while it waits
// counts no interruption (claimSet), and clears the mark.
func (db *DB) MarkWaiting(ctx context.Context, id, lease int64, waiting bool) error {
	if err := db.fenced(ctx, id, lease, `waiting = ?`, waiting); err != nil {
		return fmt.Errorf("mark queue item %d as waiting (%v): %w", id, waiting, err)
	}
	return nil
}

// fenced applies set to item id if this holder's claim with token lease
// still holds it, in one statement whose trigger moves the head along;
// core.ErrLeaseLost when it does not. On PostgreSQL the statement runs in
// a transaction that first locks the head row: the order a claim
// follows. (A finish, which moves the head on, also takes the
// conversation's lock first: on PostgreSQL it is queue_finish, see
// finishCalled.)
func (db *DB) fenced(ctx context.Context, id, lease int64, set string, args ...any) error {
	q, a := db.fence(id, lease, set, args)
	if !db.d.concurrent {
		return affected(db.w.ExecContext(ctx, q, a...))
	}
	err := db.txLocking(ctx, func(tx *txn) error {
		var conv string
		if err := tx.QueryRowContext(ctx, `SELECT conversation FROM queue WHERE id = ?`, id).Scan(&conv); err != nil {
			return err
		}
		var head int64
		if err := tx.QueryRowContext(ctx, `SELECT head FROM queue_heads WHERE conversation = ?`+db.d.forUpdate, conv).Scan(&head); err != nil {
			return err
		}
		return affected(tx.ExecContext(ctx, q, a...))
	})
	if errors.Is(err, sql.ErrNoRows) {
		// No such item, or its conversation has no head: nothing runs.
		err = core.ErrLeaseLost
	}
	return err
}

// fence is fenced's update of item id (set, with args first) and its
// arguments.
func (db *DB) fence(id, lease int64, set string, args []any) (string, []any) {
	return `UPDATE queue SET ` + set + `, updated_at = ? WHERE id = ? AND holder = ? AND lease = ? AND status = 'running'`,
		append(append([]any{}, args...), db.ms(), id, db.holder, lease)
}

// Finish implements core.QueueStore.
func (db *DB) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	if status != core.StatusDone && status != core.StatusFailed {
		return core.Errorf(core.KindInvalid, "finish queue item %d: status %q is not done or failed", id, status)
	}
	// An error's text may hold a NUL byte or broken UTF-8 (a plugin's, a
	// provider's body quoted): PostgreSQL refuses both, and a refused
	// finish would leave the item to be taken back and tried for good.
	cause = core.CleanText(cause)
	if db.d.concurrent {
		if err := db.finishCalled(ctx, id, lease, status, cause, nil); err != nil {
			return fmt.Errorf("finish queue item %d: %w", id, err)
		}
		return nil
	}
	if err := db.fenced(ctx, id, lease, finishSet, status, cause); err != nil {
		return fmt.Errorf("finish queue item %d: %w", id, err)
	}
	return nil
}

// finishSet is a finish's update of the item (status, cause).
const finishSet = `status = ?, attempts = attempts + 1, last_error = ?, holder = '', lease_until = 0`

// finishCall is the PostgreSQL finish: queue_finish (migrations_pg/150)
// does what fenced's transaction does, after taking the conversation's
// lock and with the sent part's delivery (NULLs: none), in one round
// trip.
const finishCall = `SELECT queue_finish(?::int, ?::bigint, ?::text, ?::bigint, ?::text, ?::text, ?::bigint, ?::bigint, ?::int, ?::text, ?::text)`

// finishCalled finishes item id on PostgreSQL (status, cause), recording
// sent first when not nil; core.ErrLeaseLost when this holder's claim
// no longer holds the item (the part is then still recorded, unless the
// item is gone).
func (db *DB) finishCalled(ctx context.Context, id, lease int64, status, cause string, sent *core.PartSent) error {
	var reply, part, channel, platformID any
	if sent != nil {
		reply, part, channel, platformID = sent.ReplyID, sent.Part, sent.Channel, sent.PlatformID
	}
	var held bool
	err := db.retried(ctx, func() error {
		return db.w.QueryRowContext(ctx, finishCall, convLockSpace, id, db.holder, lease, status, cause, db.ms(), reply, part, channel, platformID).Scan(&held)
	})
	if err == nil && !held {
		err = core.ErrLeaseLost
	}
	return err
}

// FinishSent implements core.SentFinisher: the item done, and the
// reply's part recorded as sent, in one transaction.
func (db *DB) FinishSent(ctx context.Context, id, lease int64, sent core.PartSent) error {
	var err error
	if db.d.concurrent {
		err = db.finishCalled(ctx, id, lease, core.StatusDone, "", &sent)
	} else {
		// The part's record and the fenced update in one transaction;
		// the record is kept even when the lease was lost.
		q, a := db.fence(id, lease, finishSet, []any{core.StatusDone, ""})
		var lost error
		err = db.txLocking(ctx, func(tx *txn) error {
			if _, err := tx.ExecContext(ctx, insertDelivery, sent.ReplyID, sent.Part, sent.Channel, sent.PlatformID, db.ms(), false); err != nil {
				return err
			}
			lost = affected(tx.ExecContext(ctx, q, a...))
			if errors.Is(lost, core.ErrLeaseLost) {
				return nil
			}
			return lost
		})
		if err == nil {
			err = lost
		}
	}
	if err != nil {
		return fmt.Errorf("finish queue item %d (reply %d part %d sent): %w", id, sent.ReplyID, sent.Part, err)
	}
	return nil
}

// Retry implements core.QueueStore.
func (db *DB) Retry(ctx context.Context, id, lease int64, notBefore time.Time, cause string) error {
	cause = core.CleanText(cause)
	if err := db.fenced(ctx, id, lease, `status = 'queued', attempts = attempts + 1, not_before = ?, last_error = ?, holder = '', lease_until = 0`,
		notBefore.UnixMilli(), cause); err != nil {
		return fmt.Errorf("retry queue item %d: %w", id, err)
	}
	return nil
}

// hastenMax bounds the items one Hasten moves.
const hastenMax = 1000

// Hasten makes those of ids that wait in the queue (queued, due after
// now) due at now, and reports how many it moved: the messages a
// provider's trouble deferred, woken once it is back. An item claimed,
// finished or due already is left alone. On PostgreSQL each item's head
// row is locked first, the order a claim follows (a waiting item is its
// conversation's head: it ran).
func (db *DB) Hasten(ctx context.Context, ids []int64, now time.Time) (int64, error) {
	if len(ids) > hastenMax {
		ids = ids[:hastenMax]
	}
	if len(ids) == 0 {
		return 0, nil
	}
	var moved int64
	err := db.txLocking(ctx, func(tx *txn) error {
		moved = 0
		nowMS := now.UnixMilli()
		for _, id := range ids {
			if db.d.concurrent {
				var head int64
				err := tx.QueryRowContext(ctx, `SELECT head FROM queue_heads WHERE head = ?`+db.d.forUpdate, id).Scan(&head)
				if errors.Is(err, sql.ErrNoRows) {
					continue // not a head: finished, or never waiting
				}
				if err != nil {
					return err
				}
			}
			res, err := tx.ExecContext(ctx, `UPDATE queue SET not_before = ?, updated_at = ? WHERE id = ? AND status = 'queued' AND not_before > ?`,
				nowMS, db.ms(), id, nowMS)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			moved += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("hasten %d waiting queue items: %w", len(ids), err)
	}
	return moved, nil
}

// Defer implements core.QueueStore. A try that ended by putting the item
// back to wait was not cut short, so the item's count of interrupted
// tries starts over: the give-up after queue.max_attempts of them is for
// a message that crashes the process every time it is tried, and kills
// that fell between tries which ended normally (a crash loop, a deploy)
// are not that message's doing.
func (db *DB) Defer(ctx context.Context, id, lease int64, notBefore time.Time, cause string, notified bool) error {
	cause = core.CleanText(cause)
	if err := db.fenced(ctx, id, lease, `status = 'queued', not_before = ?, last_error = ?, notified = (notified OR ?), interruptions = 0, holder = '', lease_until = 0`,
		notBefore.UnixMilli(), cause, notified); err != nil {
		return fmt.Errorf("defer queue item %d: %w", id, err)
	}
	return nil
}

// Release implements core.QueueStore.
func (db *DB) Release(ctx context.Context, id, lease int64) error {
	if err := db.fenced(ctx, id, lease, `status = 'queued', holder = '', lease_until = 0`); err != nil {
		return fmt.Errorf("release queue item %d: %w", id, err)
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
	err := db.r.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CASE WHEN q.status = 'running' THEN 1 END), COUNT(CASE WHEN q.status = 'running' AND q.lease_until <= ? THEN 1 END)
		FROM queue_heads h JOIN queue q ON q.id = h.head`, now.UnixMilli()).Scan(&h.Heads, &h.Running, &h.Expired)
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
