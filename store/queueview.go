package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// What `opentalon queue` reads of the queue: every query is a read on the
// read pool, so it runs beside a gateway (and against a standby).

// QueueQuery selects the queue rows QueueEntries lists.
type QueueQuery struct {
	// Statuses are the statuses listed (core.StatusQueued, ...); none:
	// every status.
	Statuses []string
	// Conversation, when set, lists only the items of that conversation
	// (its key as written: channel:chat[:thread]).
	Conversation string
	// Since, when set, leaves out the rows last changed before it.
	Since time.Time
	// NewestFirst lists the rows last changed first; otherwise they are
	// listed oldest first, in id order (the order they run in).
	NewestFirst bool
	// Limit bounds the rows listed (0: 100).
	Limit int
}

// QueueEntry is one queue row as an operator reads it.
type QueueEntry struct {
	ID           int64
	Kind         core.EventKind
	Conversation core.ConversationKey
	DedupeKey    string
	Status       string
	// Attempts counts the attempts that ended (a retry, a failure, the
	// last one); Interruptions those cut short by a crash or a kill.
	Attempts, Interruptions int
	// Notified says the user was told the answer is delayed; Waiting that
	// the running item waits for a provider's concurrency slot
	// (llm.max_concurrent_*).
	Notified, Waiting               bool
	NotBefore, CreatedAt, UpdatedAt time.Time
	// Holder is the claimer holding a running item (the replica id on
	// PostgreSQL) and LeaseUntil when its lease ends (zero: not running,
	// or a lease that does not expire).
	Holder     string
	LeaseUntil time.Time
	LastError  string
	// The event: one of them, by Kind. When it cannot be read,
	// PayloadError says why and all three are nil.
	Message      *core.Inbound
	Reaction     *core.Reaction
	Firing       *core.Firing
	PayloadError string
}

// queueEntryCols are the columns scanEntry reads.
const queueEntryCols = `id, kind, conversation, dedupe_key, payload, status, attempts, interruptions, notified, waiting,
	not_before, created_at, updated_at, holder, lease_until, last_error`

func scanEntry(scan func(...any) error) (QueueEntry, error) {
	var e QueueEntry
	var kind, conv, raw string
	var notBefore, created, updated, until int64
	if err := scan(&e.ID, &kind, &conv, &e.DedupeKey, &raw, &e.Status, &e.Attempts, &e.Interruptions, &e.Notified, &e.Waiting,
		&notBefore, &created, &updated, &e.Holder, &until, &e.LastError); err != nil {
		return e, err
	}
	e.Kind, e.Conversation = core.EventKind(kind), core.ParseConversationKey(conv)
	e.CreatedAt, e.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	if notBefore > 0 {
		e.NotBefore = time.UnixMilli(notBefore)
	}
	if until > 0 && until < forever {
		e.LeaseUntil = time.UnixMilli(until)
	}
	// One row that cannot be read does not hide the others.
	var p payload
	if err := decodePayload(e.Kind, raw, &p); err != nil {
		e.PayloadError = fmt.Sprintf("the stored %s event cannot be read (%v)", kind, err)
	} else {
		e.Message, e.Reaction, e.Firing = p.Message, p.Reaction, p.Firing
	}
	return e, nil
}

// QueueEntries lists the queue rows q selects.
func (db *DB) QueueEntries(ctx context.Context, q QueueQuery) ([]QueueEntry, error) {
	var where []string
	var args []any
	if len(q.Statuses) > 0 {
		where = append(where, `status IN (?`+strings.Repeat(`, ?`, len(q.Statuses)-1)+`)`)
		for _, s := range q.Statuses {
			args = append(args, s)
		}
	}
	if q.Conversation != "" {
		where = append(where, `conversation = ?`)
		args = append(args, q.Conversation)
	}
	if !q.Since.IsZero() {
		where = append(where, `updated_at >= ?`)
		args = append(args, q.Since.UnixMilli())
	}
	order := ` ORDER BY id`
	if q.NewestFirst {
		order = ` ORDER BY updated_at DESC, id DESC`
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	// The rows are picked by their ids first and read whole after: a sort
	// that carried every matching row's payload (on SQLite, of a queue of
	// 100,000 rows kept for state.retention, a second of sorting and of
	// read transaction, which holds back the gateway's checkpoints) sorts
	// ids alone.
	pick := `SELECT id FROM queue`
	if len(where) > 0 {
		pick += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query := `SELECT ` + queueEntryCols + ` FROM queue WHERE id IN (` + pick + order + ` LIMIT ?)` + order
	args = append(args, limit)
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list the queue: %w", err)
	}
	defer rows.Close()
	var out []QueueEntry
	for rows.Next() {
		e, err := scanEntry(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("list the queue: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the queue: %w", err)
	}
	return out, nil
}

// QueueEntry returns queue item id; ok is false when there is none (it
// never was, or it finished longer than state.retention ago and was
// pruned).
func (db *DB) QueueEntry(ctx context.Context, id int64) (e QueueEntry, ok bool, err error) {
	e, err = scanEntry(db.r.QueryRowContext(ctx, `SELECT `+queueEntryCols+` FROM queue WHERE id = ?`, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return QueueEntry{}, false, nil
	}
	if err != nil {
		return QueueEntry{}, false, fmt.Errorf("queue item %d: %w", id, err)
	}
	return e, true, nil
}

// QueueTally counts the queue's rows by status.
type QueueTally struct {
	// ByStatus counts the rows of each status.
	ByStatus map[string]int
	// FailedSince counts the failed rows that failed since the time asked.
	FailedSince int
}

// QueueTally counts the rows of conversation ("": of every one) by
// status, and the failed ones that failed since since.
func (db *DB) QueueTally(ctx context.Context, conversation string, since time.Time) (QueueTally, error) {
	t := QueueTally{ByStatus: map[string]int{}}
	rows, err := db.r.QueryContext(ctx, `SELECT status, COUNT(*), COUNT(CASE WHEN status = 'failed' AND updated_at >= ? THEN 1 END)
		FROM queue WHERE ? = '' OR conversation = ? GROUP BY status`, since.UnixMilli(), conversation, conversation)
	if err != nil {
		return t, fmt.Errorf("count the queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n, recent int
		if err := rows.Scan(&s, &n, &recent); err != nil {
			return t, fmt.Errorf("count the queue: %w", err)
		}
		t.ByStatus[s] = n
		t.FailedSince += recent
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("count the queue: %w", err)
	}
	return t, nil
}
