package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// SaveReply implements core.ReplyStore.
func (db *DB) SaveReply(ctx context.Context, r *core.Reply, msgs []core.ChatMessage) (int64, error) {
	parts, err := json.Marshal(r.Parts)
	if err != nil {
		return 0, err
	}
	meta := "{}"
	if len(r.Metadata) > 0 {
		b, err := json.Marshal(r.Metadata)
		if err != nil {
			return 0, err
		}
		meta = string(b)
	}
	files := "[]"
	if len(r.Files) > 0 {
		b, err := json.Marshal(r.Files)
		if err != nil {
			return 0, err
		}
		files = string(b)
	}
	var id int64
	// The item's deferred writes (its usage rows, the verdict on the
	// previous answer) are stored with the reply.
	d := core.DeferredFrom(ctx)
	if !d.For(db) {
		d = nil
	}
	var dw deferredWrites
	// READ COMMITTED on PostgreSQL: the reply's rows are its request's
	// alone, and the deferred writes lock the affinity row they fold into
	// (see updateAffinity), after the reply's statements, so the lock is
	// held only for the rest of the transaction.
	err = db.txLocking(ctx, func(tx *txn) error {
		if err := db.saveReplyRows(ctx, tx, r, &id, string(parts), files, meta, msgs); err != nil {
			return err
		}
		if d != nil {
			var err error
			if dw, err = db.writeDeferred(ctx, tx, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("save reply: %w", err)
	}
	dw.done(d)
	return id, nil
}

// saveReplyRows writes SaveReply's rows in tx: the reply's (or a
// stream's draft filled in; a reply saved before stands and its id is
// read), its history entries and the session's tokens.
func (db *DB) saveReplyRows(ctx context.Context, tx *txn, r *core.Reply, id *int64, parts, files, meta string, msgs []core.ChatMessage) error {
	now := db.ms()
	u := r.Usage
	var req any
	if r.RequestID != 0 {
		req = r.RequestID
	}
	created := r.CreatedAt
	if created.IsZero() {
		created = db.now()
	}
	if db.d.concurrent && len(msgs) <= messagesPerInsert {
		return saveReplyAtOnce(ctx, tx, r, id, parts, files, meta, created.UnixMilli(), now, msgs)
	}
	// The row first: a request's reply exists at most once, so a
	// second save finds the first (one statement when there is none).
	err := tx.QueryRowContext(ctx, `INSERT INTO replies (request_id, session_id, conversation, text, parts, files, model, task_type, reason,
		input_tokens, output_tokens, cost_usd, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (request_id) DO NOTHING RETURNING id`,
		req, r.SessionID, r.Conversation.String(), r.Text, parts, files, r.Model, r.TaskType, r.Reason,
		u.InputTokens, u.OutputTokens, u.CostUSD, meta, created.UnixMilli()).Scan(id)
	if errors.Is(err, sql.ErrNoRows) {
		var streaming bool
		if err := tx.QueryRowContext(ctx, `SELECT id, streaming FROM replies WHERE request_id = ?`, r.RequestID).Scan(id, &streaming); err != nil {
			return err
		}
		if !streaming {
			return nil // saved before: that one stands
		}
		// A stream's draft is filled in; its messages stay recorded. Only
		// while it is a draft: on PostgreSQL (READ COMMITTED) a concurrent
		// save of the same request may have filled it since the read, and
		// its history and tokens must not be recorded twice.
		var res sql.Result
		res, err = tx.ExecContext(ctx, `UPDATE replies SET streaming = FALSE, text = ?, parts = ?, files = ?, model = ?, task_type = ?, reason = ?,
			input_tokens = ?, output_tokens = ?, cost_usd = ?, metadata = ? WHERE id = ? AND streaming`,
			r.Text, parts, files, r.Model, r.TaskType, r.Reason, u.InputTokens, u.OutputTokens, u.CostUSD, meta, *id)
		if err == nil {
			if n, rerr := res.RowsAffected(); rerr != nil {
				err = rerr
			} else if n == 0 {
				return nil // filled meanwhile: that one stands
			}
		}
	}
	if err != nil {
		return err
	}
	if err := insertMessages(ctx, tx, r.SessionID, r.RequestID, now, msgs); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
		cost_usd = cost_usd + ?, last_access = ? WHERE id = ?`, u.InputTokens, u.OutputTokens, u.CostUSD, now, r.SessionID)
	return err
}

// saveReplyAtOnce is SaveReply's writes on PostgreSQL in one statement
// (one round trip on the network instead of three, or five with a
// stream's draft): the reply's row inserted, or the stream's draft
// filled in; its history entries (at most messagesPerInsert) and the
// session's tokens, only when one of those happened. A reply saved
// before (not a draft) stands: its id is read. (The entries are checked
// for what PostgreSQL's TEXT cannot hold even then, so a repeat save
// with such an entry is refused; its first save was.)
func saveReplyAtOnce(ctx context.Context, tx *txn, r *core.Reply, id *int64, parts, files, meta string, created, now int64, msgs []core.ChatMessage) error {
	var req any
	if r.RequestID != 0 {
		req = r.RequestID
	}
	u := r.Usage
	args := []any{req, r.SessionID, r.Conversation.String(), r.Text, parts, files, r.Model, r.TaskType, r.Reason,
		u.InputTokens, u.OutputTokens, u.CostUSD, meta, created,
		r.Text, parts, files, r.Model, r.TaskType, r.Reason, u.InputTokens, u.OutputTokens, u.CostUSD, meta, req}
	q := `WITH ins AS (INSERT INTO replies (request_id, session_id, conversation, text, parts, files, model, task_type, reason,
			input_tokens, output_tokens, cost_usd, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (request_id) DO NOTHING RETURNING id),
		upd AS (UPDATE replies SET streaming = FALSE, text = ?, parts = ?, files = ?, model = ?, task_type = ?, reason = ?,
			input_tokens = ?, output_tokens = ?, cost_usd = ?, metadata = ? WHERE request_id = ? AND streaming RETURNING id),
		r AS (SELECT id FROM ins UNION ALL SELECT id FROM upd)`
	if len(msgs) > 0 {
		rows, err := messageRows(r.SessionID, r.RequestID, now, msgs)
		if err != nil {
			return err
		}
		const row = `(?::bigint, ?::bigint, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint)`
		q += `, m AS (INSERT INTO messages (session_id, request_id, role, content, tool_calls, tool_call_id, attachments, name, created_at)
			SELECT * FROM (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", len(msgs)), ", ") + `) v WHERE EXISTS (SELECT 1 FROM r))`
		args = append(args, rows...)
	}
	q += `, s AS (UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
			cost_usd = cost_usd + ?, last_access = ? WHERE id = ? AND EXISTS (SELECT 1 FROM r))
		SELECT id FROM r`
	args = append(args, u.InputTokens, u.OutputTokens, u.CostUSD, now, r.SessionID)
	err := tx.QueryRowContext(ctx, q, args...).Scan(id)
	if errors.Is(err, sql.ErrNoRows) {
		// Saved before, and not a draft: that one stands.
		return tx.QueryRowContext(ctx, `SELECT id FROM replies WHERE request_id = ?`, r.RequestID).Scan(id)
	}
	return err
}

const replyCols = `id, COALESCE(request_id, 0), COALESCE(session_id, 0), conversation, text, parts, files, streaming, model, task_type, reason, input_tokens, output_tokens, cost_usd, metadata, created_at`

// reply loads one reply and its deliveries; nil when there is none.
func (db *DB) reply(ctx context.Context, where string, args ...any) (*core.Reply, error) {
	var r core.Reply
	var conv, parts, files, meta string
	var created int64
	err := db.r.QueryRowContext(ctx, `SELECT `+replyCols+` FROM replies WHERE `+where, args...).Scan(
		&r.ID, &r.RequestID, &r.SessionID, &conv, &r.Text, &parts, &files, &r.Streaming, &r.Model, &r.TaskType, &r.Reason,
		&r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CostUSD, &meta, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load reply: %w", err)
	}
	r.Conversation = core.ParseConversationKey(conv)
	r.CreatedAt = time.UnixMilli(created)
	if err := json.Unmarshal([]byte(parts), &r.Parts); err != nil {
		return nil, fmt.Errorf("reply %d: decode parts: %w", r.ID, err)
	}
	if meta != "{}" && meta != "" {
		if err := json.Unmarshal([]byte(meta), &r.Metadata); err != nil {
			return nil, fmt.Errorf("reply %d: decode metadata: %w", r.ID, err)
		}
	}
	if files != "[]" && files != "" {
		if err := json.Unmarshal([]byte(files), &r.Files); err != nil {
			return nil, fmt.Errorf("reply %d: decode files: %w", r.ID, err)
		}
	}
	r.Sent = make([]string, len(r.Parts)+len(r.Files))
	r.Draft = make([]bool, len(r.Sent))
	rows, err := db.r.QueryContext(ctx, `SELECT part, platform_id, draft FROM deliveries WHERE reply_id = ?`, r.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var part int
		var pid string
		var draft bool
		if err := rows.Scan(&part, &pid, &draft); err != nil {
			return nil, err
		}
		if part < 0 || part > maxParts {
			continue
		}
		for len(r.Sent) <= part {
			// A streamed message beyond the final parts.
			r.Sent, r.Draft = append(r.Sent, ""), append(r.Draft, false)
		}
		r.Sent[part], r.Draft[part] = pid, draft
	}
	return &r, rows.Err()
}

// ReplyForRequest implements core.ReplyStore; nil when there is none. A
// reply stored for the request id in another conversation is never
// returned (it is logged): it cannot be this request's answer.
func (db *DB) ReplyForRequest(ctx context.Context, requestID int64, conv core.ConversationKey) (*core.Reply, error) {
	r, err := db.reply(ctx, `request_id = ?`, requestID)
	if err != nil || r == nil {
		return r, err
	}
	if !replyBelongs(r.Conversation, conv) {
		db.log.Warn("a stored reply of another conversation has this request's id; it is not used", "request", requestID, "reply", r.ID)
		return nil, nil
	}
	return r, nil
}

// replyBelongs says whether a reply stored for conversation got may
// answer a request of conversation req: the same conversation or, when
// the request names no thread (a platform that does not say in which
// thread a reaction was made), the same chat.
func replyBelongs(got, req core.ConversationKey) bool {
	if got == req {
		return true
	}
	return req.Thread == "" && got.Channel == req.Channel && got.Chat == req.Chat
}

// Reply returns a reply by id; nil when there is none.
func (db *DB) Reply(ctx context.Context, id int64) (*core.Reply, error) {
	return db.reply(ctx, `id = ?`, id)
}

// LastReply implements core.ReplyStore; nil when there is none.
func (db *DB) LastReply(ctx context.Context, sessionID int64) (*core.Reply, error) {
	return db.reply(ctx, `session_id = ? ORDER BY id DESC LIMIT 1`, sessionID)
}

// ReplyByPlatformID implements core.ReplyStore; nil when there is none.
func (db *DB) ReplyByPlatformID(ctx context.Context, channel, platformID string) (*core.Reply, error) {
	var id int64
	err := db.r.QueryRowContext(ctx, `SELECT reply_id FROM deliveries WHERE channel = ? AND platform_id = ? ORDER BY reply_id DESC LIMIT 1`, channel, platformID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reply by %s message %s: %w", channel, platformID, err)
	}
	return db.Reply(ctx, id)
}

// maxParts bounds the part index of a delivery row read back.
const maxParts = 1 << 16

// MarkSent implements core.ReplyStore.
func (db *DB) MarkSent(ctx context.Context, replyID int64, part int, platformID string) error {
	return db.markPart(ctx, replyID, part, platformID, false)
}

// MarkDraft implements core.ReplyStore.
func (db *DB) MarkDraft(ctx context.Context, replyID int64, part int, platformID string) error {
	return db.markPart(ctx, replyID, part, platformID, true)
}

// insertDelivery records a part sent (or a draft's message).
const insertDelivery = `INSERT INTO deliveries (reply_id, part, channel, platform_id, sent_at, draft) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (reply_id, part) DO UPDATE SET platform_id = excluded.platform_id, sent_at = excluded.sent_at, draft = excluded.draft`

func (db *DB) markPart(ctx context.Context, replyID int64, part int, platformID string, draft bool) error {
	var conv string
	if err := db.r.QueryRowContext(ctx, `SELECT conversation FROM replies WHERE id = ?`, replyID).Scan(&conv); err != nil {
		return fmt.Errorf("mark reply %d part %d sent: %w", replyID, part, err)
	}
	channel, _, _ := strings.Cut(conv, ":")
	_, err := db.w.ExecContext(ctx, insertDelivery, replyID, part, channel, platformID, db.ms(), draft)
	if err != nil {
		return fmt.Errorf("mark reply %d part %d sent: %w", replyID, part, err)
	}
	return nil
}

// ForgetPart implements core.ReplyStore.
func (db *DB) ForgetPart(ctx context.Context, replyID int64, part int) error {
	if _, err := db.w.ExecContext(ctx, `DELETE FROM deliveries WHERE reply_id = ? AND part = ?`, replyID, part); err != nil {
		return fmt.Errorf("forget reply %d part %d: %w", replyID, part, err)
	}
	return nil
}

// BeginReply implements core.ReplyStore.
func (db *DB) BeginReply(ctx context.Context, r *core.Reply) (int64, error) {
	if r.RequestID == 0 {
		return 0, fmt.Errorf("begin reply: a streamed reply needs its request")
	}
	created := r.CreatedAt
	if created.IsZero() {
		created = db.now()
	}
	var sess any
	if r.SessionID != 0 {
		sess = r.SessionID
	}
	var id int64
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replies (request_id, session_id, conversation, text, parts, streaming, created_at)
			VALUES (?, ?, ?, '', '[]', TRUE, ?) ON CONFLICT (request_id) DO NOTHING`,
			r.RequestID, sess, r.Conversation.String(), created.UnixMilli()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT id FROM replies WHERE request_id = ?`, r.RequestID).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("begin reply to request %d: %w", r.RequestID, err)
	}
	return id, nil
}
