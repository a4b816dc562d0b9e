package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// SetSessionState stores a session's orchestration state.
func (db *DB) SetSessionState(ctx context.Context, sessionID int64, st core.SessionState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := db.w.ExecContext(ctx, `UPDATE sessions SET state = ? WHERE id = ?`, string(b), sessionID); err != nil {
		return fmt.Errorf("save state of session %d: %w", sessionID, err)
	}
	return nil
}

// AddSessionUsage adds tokens spent outside a reply (a compaction) to
// the session's cumulative usage.
func (db *DB) AddSessionUsage(ctx context.Context, sessionID int64, u core.Usage) error {
	_, err := db.w.ExecContext(ctx, `UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
		cost_usd = cost_usd + ? WHERE id = ?`, u.InputTokens, u.OutputTokens, u.CostUSD, sessionID)
	if err != nil {
		return fmt.Errorf("add usage to session %d: %w", sessionID, err)
	}
	return nil
}

// CompactHistory replaces every message of the session except the
// newest keep ones (an earlier summary included) with summary, stored at
// the head of the history and marked as a summary. It returns how many
// messages it replaced (0 = nothing older than the kept ones; then
// nothing changes).
func (db *DB) CompactHistory(ctx context.Context, sessionID int64, keep int, summary string) (int, error) {
	if keep < 0 {
		keep = 0
	}
	var n int
	err := db.tx(ctx, func(tx *txn) error {
		n = 0 // a run again starts from scratch
		var cut int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?`, sessionID, keep).Scan(&cut)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE session_id = ? AND id <= ?`, sessionID, cut)
		if err != nil {
			return err
		}
		deleted, _ := res.RowsAffected()
		n = int(deleted)
		// The summary takes the id of the newest message it replaces, so it
		// sorts before every kept message.
		_, err = tx.ExecContext(ctx, `INSERT INTO messages (id, session_id, role, content, summary, created_at) VALUES (?, ?, ?, ?, TRUE, ?)`,
			cut, sessionID, string(core.RoleSystem), core.CleanText(summary), db.ms())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("compact history of session %d: %w", sessionID, err)
	}
	return n, nil
}

// ExpireSessions deletes the sessions, active or ended, not used for
// longer than Options.SessionTTL, with their history; replies,
// deliveries, signals and the usage ledger stay. A session whose
// conversation has a request running is kept. The newest session row
// stays as an emptied, ended tombstone, so its id (which the usage ledger
// refers to) is never handed to a new session. It returns how many
// sessions it expired; with no TTL it expires nothing.
func (db *DB) ExpireSessions(ctx context.Context) (int, error) {
	if db.ttl <= 0 {
		return 0, nil
	}
	const expired = `last_access < ? AND conversation NOT IN (SELECT conversation FROM queue WHERE status = 'running')`
	cutoff := db.ms() - db.ttl.Milliseconds()
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		// A conversation whose active session expires keeps its /model
		// pins: it gets a new, empty session with them (a pin holds until
		// /model auto, as it does across /new).
		pinned, err := expiredPins(ctx, tx, `active = TRUE AND (model_pin <> '' OR profile_pin <> '') AND `+expired, cutoff)
		if err != nil {
			return err
		}
		var newest int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM sessions`).Scan(&newest); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id < ? AND `+expired, newest, cutoff)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		res, err = tx.ExecContext(ctx, `UPDATE sessions SET active = FALSE, ended_at = COALESCE(ended_at, ?), state = '{}'
			WHERE id = ? AND (active = TRUE OR state != '{}' OR EXISTS (SELECT 1 FROM messages WHERE session_id = sessions.id)) AND `+expired,
			db.ms(), newest, cutoff)
		if err != nil {
			return err
		}
		if t, _ := res.RowsAffected(); t > 0 {
			n += t
			if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE session_id = ?`, newest); err != nil {
				return err
			}
		}
		for conv, pins := range pinned {
			if _, _, err := db.createSession(ctx, tx, core.ParseConversationKey(conv), pins); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}

// expiredPins reads the pins of the sessions where matches (a condition
// with one parameter, arg), by conversation.
func expiredPins(ctx context.Context, tx *txn, where string, arg any) (map[string]sessionPins, error) {
	rows, err := tx.QueryContext(ctx, `SELECT conversation, model_pin, profile_pin FROM sessions WHERE `+where, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	pins := map[string]sessionPins{}
	for rows.Next() {
		var conv string
		var p sessionPins
		if err := rows.Scan(&conv, &p.model, &p.profile); err != nil {
			return nil, err
		}
		pins[conv] = p
	}
	return pins, rows.Err()
}

// SessionRecord is a session as kept in the database, for export.
type SessionRecord struct {
	core.Session
	Active  bool
	EndedAt time.Time
}

// ConversationSessions returns the sessions of a conversation still in the
// database, oldest first: the active one and those ended by /new that
// have not expired yet.
func (db *DB) ConversationSessions(ctx context.Context, conv core.ConversationKey) ([]SessionRecord, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+sessionCols+`, active, COALESCE(ended_at, 0) FROM sessions WHERE conversation = ? ORDER BY id`, conv.String())
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", conv, err)
	}
	defer rows.Close()
	var out []SessionRecord
	for rows.Next() {
		var r SessionRecord
		var ended int64
		s, err := scanSession(scanFunc(func(dst ...any) error {
			return rows.Scan(append(dst, &r.Active, &ended)...)
		}))
		if err != nil {
			return nil, fmt.Errorf("sessions of %s: %w", conv, err)
		}
		r.Session = s
		if ended > 0 {
			r.EndedAt = time.UnixMilli(ended)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanFunc adapts a function to scanSession's row.
type scanFunc func(dst ...any) error

func (f scanFunc) Scan(dst ...any) error { return f(dst...) }

// StoredMessage is one history entry with what the database knows of it.
type StoredMessage struct {
	core.ChatMessage
	ID        int64
	RequestID int64
	// Summary marks a compaction summary.
	Summary   bool
	CreatedAt time.Time
}

// Transcript returns every message of a session, oldest first.
func (db *DB) Transcript(ctx context.Context, sessionID int64) ([]StoredMessage, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, COALESCE(request_id, 0), role, content, tool_calls, tool_call_id, summary, created_at, name
		FROM messages WHERE session_id = ? ORDER BY id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("transcript of session %d: %w", sessionID, err)
	}
	defer rows.Close()
	var out []StoredMessage
	for rows.Next() {
		var m StoredMessage
		var role string
		var calls sql.NullString
		var created int64
		if err := rows.Scan(&m.ID, &m.RequestID, &role, &m.Content, &calls, &m.ToolCallID, &m.Summary, &created, &m.Name); err != nil {
			return nil, err
		}
		m.Role = core.Role(role)
		m.CreatedAt = time.UnixMilli(created)
		if err := decodeCalls(calls, &m.ChatMessage); err != nil {
			return nil, fmt.Errorf("transcript of session %d: %w", sessionID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
