package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

var _ core.Store = (*DB)(nil)

// payload is what a queue row stores of its event.
type payload struct {
	Message  *core.Inbound  `json:"message,omitempty"`
	Reaction *core.Reaction `json:"reaction,omitempty"`
	Firing   *core.Firing   `json:"firing,omitempty"`
}

// Enqueue implements core.QueueStore.
func (db *DB) Enqueue(ctx context.Context, it core.QueueItem) (int64, bool, error) {
	if it.DedupeKey == "" {
		return 0, false, core.Errorf(core.KindInvalid, "enqueue: empty dedupe key")
	}
	b, err := json.Marshal(payload{Message: it.Message, Reaction: it.Reaction, Firing: it.Firing})
	if err != nil {
		return 0, false, fmt.Errorf("enqueue: encode event: %w", err)
	}
	created := it.CreatedAt
	if created.IsZero() {
		created = db.now()
	}
	now := db.ms()
	conv := it.Conversation.String()
	// One statement inserts the row unless the conversation is full; the
	// pending count reads the queue_pending index only.
	res, err := db.durable(ctx, `INSERT INTO queue (dedupe_key, kind, conversation, payload, not_before, created_at, updated_at)
		SELECT ?, ?, ?, ?, ?, ?, ? WHERE ? <= 0 OR (SELECT COUNT(*) FROM queue WHERE conversation = ? AND status IN ('queued', 'running')) < ?
		ON CONFLICT (dedupe_key) DO NOTHING`,
		it.DedupeKey, string(it.Kind), conv, string(b), it.NotBefore.UnixMilli(), created.UnixMilli(), now,
		it.MaxPending, conv, it.MaxPending)
	if err != nil {
		return 0, false, fmt.Errorf("enqueue: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if it.MaxPending <= 0 {
			return 0, true, nil
		}
		// Not inserted: a duplicate, or the conversation is full.
		var one int
		switch err := db.r.QueryRowContext(ctx, `SELECT 1 FROM queue WHERE dedupe_key = ?`, it.DedupeKey).Scan(&one); {
		case err == nil:
			return 0, true, nil
		case errors.Is(err, sql.ErrNoRows):
			return 0, false, core.ErrConversationFull
		default:
			return 0, false, fmt.Errorf("enqueue: %w", err)
		}
	}
	id, err := res.LastInsertId()
	return id, false, err
}

// durable runs one write whose commit reaches the disk before it returns.
// The writer runs synchronous=NORMAL, which may lose the last commits on
// a power loss or an OS crash (never on a crash of the process); the
// platform is acknowledged once Enqueue returns, so an accepted message
// must survive either. In WAL mode a commit is frames appended to the
// write-ahead log, so flushing that file after the commit makes it as
// durable as synchronous=FULL would, without switching the writer's
// level around the statement (two more statements, each parsed anew)
// and with the statement's prepared form cached.
func (db *DB) durable(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := db.w.ExecContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if err := db.syncWAL(); err != nil {
		return nil, fmt.Errorf("flush the write-ahead log to disk: %w", err)
	}
	return res, nil
}

// syncWAL flushes the write-ahead log (the database file itself when
// there is no log, as before the first write).
func (db *DB) syncWAL() error {
	err := db.syncFile(db.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		err = db.syncFile(db.path)
	}
	return err
}

// fsync flushes the file at path to the disk.
func fsync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// EditQueued implements core.QueueStore.
func (db *DB) EditQueued(ctx context.Context, dedupeKey, text string) (bool, error) {
	edited := false
	err := db.tx(ctx, func(tx *txn) error {
		var raw string
		err := tx.QueryRowContext(ctx, `SELECT payload FROM queue WHERE dedupe_key = ? AND status = 'queued'`, dedupeKey).Scan(&raw)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var p payload
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			return err
		}
		if p.Message == nil {
			return nil
		}
		p.Message.Text = text
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE queue SET payload = ?, updated_at = ? WHERE dedupe_key = ?`, string(b), db.ms(), dedupeKey)
		edited = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("edit queued message: %w", err)
	}
	return edited, nil
}

// RequeueRunning implements core.QueueStore. An interrupted attempt counts
// as an interruption, so a message that crashes the process cannot loop
// forever; it is no failed attempt. It also prunes finished rows past
// Options.QueueRetention.
func (db *DB) RequeueRunning(ctx context.Context) (int, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE queue SET status = 'queued', interruptions = interruptions + 1,
		last_error = 'interrupted by a stop', updated_at = ? WHERE status = 'running'`, db.ms())
	if err != nil {
		return 0, fmt.Errorf("requeue running: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := db.PruneQueue(ctx); err != nil {
		return int(n), err
	}
	return int(n), nil
}

// PruneQueue deletes finished (done or failed) queue rows that ended
// longer than Options.QueueRetention ago and returns how many; with no
// retention it keeps everything. Replies, deliveries, history, signals
// and usage are not touched: reactions, learning and the cost ledger
// refer to them for longer.
func (db *DB) PruneQueue(ctx context.Context) (int, error) {
	if db.keep <= 0 {
		return 0, nil
	}
	res, err := db.w.ExecContext(ctx, `DELETE FROM queue WHERE status IN ('done', 'failed') AND updated_at < ?`, db.ms()-db.keep.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("prune queue: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Claim implements core.QueueStore. The heads are read from the read
// pool first: most calls find nothing to claim and then take no write
// lock. The gateway's dispatcher is the only claimer, so the heads read
// are still queued when the write marks them running (the write checks).
func (db *DB) Claim(ctx context.Context, n int, now time.Time) ([]core.QueueItem, time.Time, error) {
	items, next, bad, err := db.heads(ctx, n, now)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
	}
	if len(items) == 0 && len(bad) == 0 {
		return nil, next, nil
	}
	claimed := map[int64]bool{}
	err = db.tx(ctx, func(tx *txn) error {
		clear(claimed)
		for _, b := range bad {
			if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = 'failed', attempts = attempts + 1, last_error = ?, updated_at = ? WHERE id = ?`,
				"the stored event cannot be read: "+b.err.Error(), db.ms(), b.id); err != nil {
				return err
			}
		}
		if len(items) == 0 {
			return nil
		}
		ids := make([]string, len(items))
		args := []any{db.ms()}
		for i, it := range items {
			ids[i] = "?"
			args = append(args, it.ID)
		}
		rows, err := tx.QueryContext(ctx, `UPDATE queue SET status = 'running', updated_at = ? WHERE id IN (`+strings.Join(ids, ",")+`) AND status = 'queued' RETURNING id`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			claimed[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim from queue: %w", err)
	}
	for _, b := range bad {
		db.log.Error("queue row cannot be read; marked failed", "request", b.id, "err", b.err)
	}
	if len(bad) > 0 {
		// The next row of each such conversation is due at once.
		next = now
	}
	out := items[:0]
	for _, it := range items {
		if claimed[it.ID] {
			out = append(out, it)
		}
	}
	return out, next, nil
}

// unreadable is a queue row whose event cannot be decoded.
type unreadable struct {
	id  int64
	err error
}

// heads reads the head of each conversation, its oldest unfinished row,
// and returns up to n that are queued and due at now, the earliest time
// a head not yet due becomes due, and the heads that cannot be read. The
// heads are read off the queue_pending index (it holds unfinished rows
// only, by conversation), and only the rows of the queued heads (a
// running head keeps its conversation busy).
func (db *DB) heads(ctx context.Context, n int, now time.Time) (items []core.QueueItem, next time.Time, bad []unreadable, err error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, kind, conversation, dedupe_key, payload, attempts, interruptions, notified, not_before, created_at
		FROM queue WHERE id IN (SELECT MIN(id) FROM queue INDEXED BY queue_pending WHERE status IN ('queued', 'running') GROUP BY conversation)
		AND status = 'queued' ORDER BY id`)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	defer rows.Close()
	nowMS := now.UnixMilli()
	for rows.Next() {
		var it core.QueueItem
		var kind, conv, raw string
		var notBefore, created int64
		if err := rows.Scan(&it.ID, &kind, &conv, &it.DedupeKey, &raw, &it.Attempts, &it.Interruptions, &it.Notified, &notBefore, &created); err != nil {
			return nil, time.Time{}, nil, err
		}
		if notBefore > nowMS {
			if t := time.UnixMilli(notBefore); next.IsZero() || t.Before(next) {
				next = t
			}
			continue
		}
		if len(items) == n {
			continue
		}
		var p payload
		if err := decodePayload(core.EventKind(kind), raw, &p); err != nil {
			// One unreadable row must not stall the queue: the caller
			// fails it and claims the rest as usual.
			bad = append(bad, unreadable{it.ID, err})
			continue
		}
		it.Kind, it.Conversation = core.EventKind(kind), core.ParseConversationKey(conv)
		it.Message, it.Reaction, it.Firing = p.Message, p.Reaction, p.Firing
		it.NotBefore, it.CreatedAt = time.UnixMilli(notBefore), time.UnixMilli(created)
		items = append(items, it)
	}
	return items, next, bad, rows.Err()
}

// decodePayload reads a queue row's event and checks it holds what its
// kind needs.
func decodePayload(kind core.EventKind, raw string, p *payload) error {
	if err := json.Unmarshal([]byte(raw), p); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	switch {
	case kind == core.EventMessage && p.Message == nil:
		return fmt.Errorf("a message row holds no message")
	case kind == core.EventReaction && p.Reaction == nil:
		return fmt.Errorf("a reaction row holds no reaction")
	case kind == core.EventScheduled && p.Firing == nil:
		return fmt.Errorf("a schedule row holds no firing")
	}
	return nil
}

// Retry implements core.QueueStore.
func (db *DB) Retry(ctx context.Context, id int64, notBefore time.Time, cause string) error {
	_, err := db.w.ExecContext(ctx, `UPDATE queue SET status = 'queued', attempts = attempts + 1, not_before = ?, last_error = ?, updated_at = ? WHERE id = ?`,
		notBefore.UnixMilli(), cause, db.ms(), id)
	if err != nil {
		return fmt.Errorf("retry queue item %d: %w", id, err)
	}
	return nil
}

// Defer implements core.QueueStore.
func (db *DB) Defer(ctx context.Context, id int64, notBefore time.Time, cause string, notified bool) error {
	_, err := db.w.ExecContext(ctx, `UPDATE queue SET status = 'queued', not_before = ?, last_error = ?, notified = (notified OR ?), updated_at = ? WHERE id = ?`,
		notBefore.UnixMilli(), cause, notified, db.ms(), id)
	if err != nil {
		return fmt.Errorf("defer queue item %d: %w", id, err)
	}
	return nil
}

// Release implements core.QueueStore.
func (db *DB) Release(ctx context.Context, id int64) error {
	_, err := db.w.ExecContext(ctx, `UPDATE queue SET status = 'queued', updated_at = ? WHERE id = ? AND status = 'running'`, db.ms(), id)
	if err != nil {
		return fmt.Errorf("release queue item %d: %w", id, err)
	}
	return nil
}

// Running implements core.QueueStore.
func (db *DB) Running(ctx context.Context) ([]int64, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id FROM queue WHERE status = 'running' ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("running queue items: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Finish implements core.QueueStore.
func (db *DB) Finish(ctx context.Context, id int64, status, cause string) error {
	if status != core.StatusDone && status != core.StatusFailed {
		return core.Errorf(core.KindInvalid, "finish queue item %d: status %q is not done or failed", id, status)
	}
	_, err := db.w.ExecContext(ctx, `UPDATE queue SET status = ?, attempts = attempts + 1, last_error = ?, updated_at = ? WHERE id = ?`,
		status, cause, db.ms(), id)
	if err != nil {
		return fmt.Errorf("finish queue item %d: %w", id, err)
	}
	return nil
}

// QueueStatus returns an item's status, attempts and last error (for
// tests and `opentalon queue`).
func (db *DB) QueueStatus(ctx context.Context, id int64) (status string, attempts int, lastErr string, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT status, attempts, last_error FROM queue WHERE id = ?`, id).Scan(&status, &attempts, &lastErr)
	return
}

// QueueItem returns one queue row with its status (for tests and
// operators' tools).
func (db *DB) QueueItem(ctx context.Context, id int64) (core.QueueItem, string, error) {
	var it core.QueueItem
	var kind, conv, raw, status string
	var notBefore, created int64
	err := db.r.QueryRowContext(ctx, `SELECT id, kind, conversation, dedupe_key, payload, status, attempts, interruptions, notified, not_before, created_at FROM queue WHERE id = ?`, id).
		Scan(&it.ID, &kind, &conv, &it.DedupeKey, &raw, &status, &it.Attempts, &it.Interruptions, &it.Notified, &notBefore, &created)
	if err != nil {
		return it, "", fmt.Errorf("queue item %d: %w", id, err)
	}
	var p payload
	if err := decodePayload(core.EventKind(kind), raw, &p); err != nil {
		return it, status, fmt.Errorf("queue item %d: %w", id, err)
	}
	it.Kind, it.Conversation = core.EventKind(kind), core.ParseConversationKey(conv)
	it.Message, it.Reaction, it.Firing = p.Message, p.Reaction, p.Firing
	it.NotBefore, it.CreatedAt = time.UnixMilli(notBefore), time.UnixMilli(created)
	return it, status, nil
}

// QueueCounts counts queue rows by status.
func (db *DB) QueueCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT status, COUNT(*) FROM queue GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}
