package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
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

// Enqueue implements core.QueueStore. The row's trigger makes it its
// conversation's head when the conversation had no unfinished work (and,
// on PostgreSQL, notifies the other replicas). On SQLite it is one
// statement that also checks the pending cap; on PostgreSQL one call of a
// function that first takes the conversation's lock, so the ids of one
// conversation commit in order and the cap counts what is committed.
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
	conv := it.Conversation.String()
	row := []any{it.DedupeKey, string(it.Kind), conv, string(b), it.NotBefore.UnixMilli(), created.UnixMilli(), db.ms()}
	var id int64
	if db.d.concurrent {
		// One statement (queue_enqueue, migrations_pg/150): the
		// conversation's lock, then the insert, which checks the pending
		// cap itself. NULL is a duplicate or a full conversation
		// (enqueued tells them apart).
		err = db.retried(ctx, func() error {
			var got sql.NullInt64
			err := db.w.QueryRowContext(ctx, enqueueCall, append([]any{convLockSpace}, append(row, it.MaxPending)...)...).Scan(&got)
			id = got.Int64
			return err
		})
	} else {
		id, _, err = db.insertSerial(ctx, it, string(b), created, time.Time{}, false)
		if err == nil {
			if err := db.flush(); err != nil {
				return 0, false, fmt.Errorf("enqueue: %w", err)
			}
		}
	}
	return db.enqueued(ctx, it, id, err)
}

// enqueueCall is the PostgreSQL enqueue: queue_enqueue(lock space, the
// row, the cap) takes the conversation's lock and inserts the row unless
// the conversation holds the cap of unfinished items (0 = none), in one
// round trip and one transaction, as the statement's own.
const enqueueCall = `SELECT queue_enqueue(?::int, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::bigint, ?::bigint, ?::bigint)`

// enqueued is the end of an enqueue whose insert returned id and err:
// the id, or whether the item was a duplicate, or why it was refused.
func (db *DB) enqueued(ctx context.Context, it core.QueueItem, id int64, err error) (int64, bool, error) {
	if id != 0 && err == nil {
		return id, false, nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("enqueue: %w", err)
	}
	// Not inserted: a duplicate, or the conversation is full.
	if it.MaxPending <= 0 {
		return 0, true, nil
	}
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

// EnqueueClaim implements core.EnqueueClaimer. On SQLite the one insert
// also claims the item for this claimer (status running under a fresh
// lease, as Claim would) when nothing else of its conversation is
// unfinished and it is due at now: the message that finds its
// conversation idle costs no claim of its own, and its work starts
// while the log is flushed. Otherwise, and on PostgreSQL (where replicas
// share the claims), it is Enqueue.
// ClaimsAtEnqueue implements core.EnqueueClaimer: on SQLite.
func (db *DB) ClaimsAtEnqueue() bool { return !db.d.concurrent }

func (db *DB) EnqueueClaim(ctx context.Context, it core.QueueItem, now time.Time, start func(core.QueueItem)) (bool, bool, error) {
	if db.d.concurrent || it.DedupeKey == "" {
		_, dup, err := db.Enqueue(ctx, it)
		return false, dup, err
	}
	// A sole claimer's first claim ends every lease left by a crash; it
	// must come before this one's, or it would end it too.
	if err := db.takeBackOnce(ctx); err != nil {
		return false, false, fmt.Errorf("enqueue: %w", err)
	}
	b, err := json.Marshal(payload{Message: it.Message, Reaction: it.Reaction, Firing: it.Firing})
	if err != nil {
		return false, false, fmt.Errorf("enqueue: encode event: %w", err)
	}
	if it.CreatedAt.IsZero() {
		it.CreatedAt = db.now()
	}
	id, claimed, err := db.insertSerial(ctx, it, string(b), it.CreatedAt, now, true)
	if err != nil || !claimed {
		if err == nil {
			if err := db.flush(); err != nil {
				return false, false, fmt.Errorf("enqueue: %w", err)
			}
		}
		_, dup, err := db.enqueued(ctx, it, id, err)
		return false, dup, err
	}
	// The claimed item as Claim returns it: the event read back from
	// what was stored, a first lease, no reply yet.
	var p payload
	if err := decodePayload(it.Kind, string(b), &p); err != nil {
		// Not started: it comes back when its lease ends.
		return false, false, errors.Join(fmt.Errorf("enqueue: %w", err), db.flush())
	}
	durable := make(chan struct{})
	start(core.QueueItem{ID: id, Kind: it.Kind, Conversation: it.Conversation, DedupeKey: it.DedupeKey,
		Message: p.Message, Reaction: p.Reaction, Firing: p.Firing,
		NotBefore: time.UnixMilli(it.NotBefore.UnixMilli()), CreatedAt: time.UnixMilli(it.CreatedAt.UnixMilli()),
		Lease: 1, NoReply: true, Durable: durable})
	err = db.flush()
	close(durable)
	if err != nil {
		return true, false, fmt.Errorf("enqueue: %w", err)
	}
	return true, false, nil
}

// insertSerial is the SQLite enqueue: one statement inserts the row
// unless the conversation is full (the pending count reads the
// queue_pending index only), and with claim it inserts it claimed for
// this claimer (running under a first lease ending a TTL after now) when
// it is due at now and its conversation has no head, so it becomes the
// head. claimed says it was.
//
// Concurrent calls are grouped (insertGroup): those that arrive while
// one is being written go into the database together, in one
// transaction.
func (db *DB) insertSerial(ctx context.Context, it core.QueueItem, payload string, created, now time.Time, claim bool) (id int64, claimed bool, err error) {
	r := &serialInsert{args: db.insertSerialArgs(it, payload, created, now, claim)}
	db.insertGrouped(ctx, r)
	return r.id, r.claimed, r.err
}

// insertSerialQuery is insertSerial's statement: its arguments are
// insertSerialArgs, it returns the id and whether the row was claimed
// (no row: a duplicate, or the conversation is full).
const insertSerialQuery = `WITH c (run) AS (SELECT ? AND ? <= ? AND NOT EXISTS (SELECT 1 FROM queue_heads WHERE conversation = ?))
		INSERT INTO queue (dedupe_key, kind, conversation, payload, not_before, created_at, updated_at, status, holder, lease, lease_until)
		SELECT ?, ?, ?, ?, ?, ?, ?, CASE WHEN run THEN 'running' ELSE 'queued' END, CASE WHEN run THEN ? ELSE '' END, run, CASE WHEN run THEN ? ELSE 0 END
		FROM c WHERE ? <= 0 OR (SELECT COUNT(*) FROM queue WHERE conversation = ? AND status IN ('queued', 'running')) < ?
		ON CONFLICT (dedupe_key) DO NOTHING RETURNING id, status = 'running'`

func (db *DB) insertSerialArgs(it core.QueueItem, payload string, created, now time.Time, claim bool) []any {
	conv := it.Conversation.String()
	return []any{claim, it.NotBefore.UnixMilli(), now.UnixMilli(), conv,
		it.DedupeKey, string(it.Kind), conv, payload, it.NotBefore.UnixMilli(), created.UnixMilli(), db.ms(),
		db.holder, db.leaseEnd(now), it.MaxPending, conv, it.MaxPending}
}

// convLockSpace is the first key of the conversations' advisory locks
// on PostgreSQL (the two-key space does not meet the migration lock's
// one-key space). The lock, on the conversation's hash, serializes what
// adds to a conversation or moves its head (queue_enqueue and
// queue_finish, migrations_pg/150): ids of one conversation then commit
// in id order, and a head is never deleted while an enqueue relies on
// it. A collision of hashes only makes two conversations wait for each
// other. SQLite has one writer at a time.
const convLockSpace = 0x6f74 // "ot"

// flush makes the commits so far reach the disk before it returns. The
// SQLite writer runs synchronous=NORMAL, which may lose the last commits
// on a power loss or an OS crash (never on a crash of the process); the
// platform is acknowledged once Enqueue returns, so an accepted message
// must survive either. In WAL mode a commit is frames appended to the
// write-ahead log, so flushing that file after the commit makes it as
// durable as synchronous=FULL would, without switching the writer's
// level around the transaction. A PostgreSQL commit is durable when it
// returns (synchronous_commit on, the server's default).
//
// Concurrent flushes are one group commit: a flush that finds a sync
// started after its own commit was made waits for that one instead of
// syncing again.
func (db *DB) flush() error {
	if db.d.concurrent {
		return nil
	}
	db.named.wait() // a new database's name is durable too
	g := &db.group
	mine := g.committed.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.synced >= mine {
		return nil // a sync that began after this commit covered it
	}
	upto := g.committed.Load()
	if err := db.syncWAL(); err != nil {
		return fmt.Errorf("flush the write-ahead log to disk: %w", err)
	}
	g.synced = upto
	return nil
}

// groupSync is the state of the enqueue's group commit: commits counted
// as they are made, and how many of them the last sync covers.
type groupSync struct {
	committed atomic.Int64
	mu        sync.Mutex
	synced    int64
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

// fileSyncer flushes files to the disk and keeps each one it flushed
// open: the write-ahead log is flushed after every enqueue, and opening
// and closing it each time cost about as much as flushing it. A kept
// file is used only while the path still names it (the log is deleted
// when the last connection closes, and a new one made by the next).
type fileSyncer struct {
	mu    sync.Mutex
	files map[string]keptFile
}

type keptFile struct {
	f  *os.File
	fi os.FileInfo
}

// sync flushes the file at path: its data and what reading it back
// needs (fdatasync; the size of a log that grew, not its times).
func (s *fileSyncer) sync(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := os.Stat(path)
	if err != nil {
		s.drop(path)
		return err
	}
	k, ok := s.files[path]
	if !ok || !os.SameFile(k.fi, cur) {
		s.drop(path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		if s.files == nil {
			s.files = map[string]keptFile{}
		}
		k = keptFile{f, cur}
		s.files[path] = k
	}
	if err := fdatasync(k.f); err != nil {
		s.drop(path)
		return err
	}
	return nil
}

func (s *fileSyncer) drop(path string) {
	if k, ok := s.files[path]; ok {
		k.f.Close()
		delete(s.files, path)
	}
}

// close closes the kept files.
func (s *fileSyncer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.files {
		s.drop(p)
	}
}

// EditQueued implements core.QueueStore.
func (db *DB) EditQueued(ctx context.Context, dedupeKey, text string) (bool, error) {
	edited := false
	err := db.tx(ctx, func(tx *txn) error {
		edited = false // a run again starts from scratch
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

// QueuedIn implements core.AsideClaimer: the queued items of conv, oldest
// first, at most limit; one whose event cannot be decoded is left out
// (the claim in order fails it).
func (db *DB) QueuedIn(ctx context.Context, conv core.ConversationKey, limit int) ([]core.QueueItem, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, kind, dedupe_key, payload, not_before, created_at FROM queue
		WHERE conversation = ? AND status = 'queued' ORDER BY id LIMIT ?`, conv.String(), limit)
	if err != nil {
		return nil, fmt.Errorf("queued items of %s: %w", conv, err)
	}
	defer rows.Close()
	var out []core.QueueItem
	for rows.Next() {
		it := core.QueueItem{Conversation: conv}
		var kind, raw string
		var notBefore, created int64
		if err := rows.Scan(&it.ID, &kind, &it.DedupeKey, &raw, &notBefore, &created); err != nil {
			return nil, fmt.Errorf("queued items of %s: %w", conv, err)
		}
		var p payload
		if decodePayload(core.EventKind(kind), raw, &p) != nil {
			continue
		}
		it.Kind, it.Message, it.Reaction, it.Firing = core.EventKind(kind), p.Message, p.Reaction, p.Firing
		it.NotBefore, it.CreatedAt = time.UnixMilli(notBefore), time.UnixMilli(created)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queued items of %s: %w", conv, err)
	}
	return out, nil
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
