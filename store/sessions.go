package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

const sessionCols = `id, conversation, model_pin, profile_pin, input_tokens, output_tokens, cost_usd, created_at, last_access, state`

// sessionColsS is sessionCols of the table aliased s.
const sessionColsS = `s.id, s.conversation, s.model_pin, s.profile_pin, s.input_tokens, s.output_tokens, s.cost_usd, s.created_at, s.last_access, s.state`

func scanSession(row interface{ Scan(...any) error }) (core.Session, error) {
	var s core.Session
	var conv, state string
	var created, last int64
	err := row.Scan(&s.ID, &conv, &s.ModelPin, &s.ProfilePin, &s.Usage.InputTokens, &s.Usage.OutputTokens, &s.Usage.CostUSD, &created, &last, &state)
	s.Conversation = core.ParseConversationKey(conv)
	s.CreatedAt, s.LastAccess = time.UnixMilli(created), time.UnixMilli(last)
	if err == nil && state != "" && state != "{}" {
		if jerr := json.Unmarshal([]byte(state), &s.State); jerr != nil {
			// A state this version cannot read starts afresh rather than
			// locking the conversation out.
			s.State = core.SessionState{}
		}
	}
	return s, err
}

// ActiveSession implements core.SessionStore.
func (db *DB) ActiveSession(ctx context.Context, conv core.ConversationKey) (core.Session, error) {
	// A session used a moment ago is returned from the read pool: its last
	// access is touched at most every touchEvery (one write less on most
	// messages of a lively conversation).
	if s, err := scanSession(db.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE conversation = ? AND active = TRUE`, conv.String())); err == nil {
		if age := db.now().Sub(s.LastAccess); age >= 0 && age < db.touchEvery() {
			return s, nil
		}
	}
	s, _, err := db.activeSessionTx(ctx, conv)
	return s, err
}

// activeSessionTx is ActiveSession's write: the session touched, or
// created when there is none or it expired. On PostgreSQL it runs READ
// COMMITTED with the conversation's active row locked (FOR UPDATE), and
// a session is created only while the conversation has none (another
// transaction's new one is used instead). SERIALIZABLE aborted most of
// these transactions when many conversations' sessions were touched at
// once: its predicate locks cover index pages, not conversations.
func (db *DB) activeSessionTx(ctx context.Context, conv core.ConversationKey) (core.Session, bool, error) {
	var s core.Session
	created := false
	err := db.txLocking(ctx, func(tx *txn) error {
		for {
			var err error
			var idle time.Duration
			created = false
			s, err = scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE conversation = ? AND active = TRUE`+db.d.forUpdate, conv.String()))
			now := db.now()
			var pins sessionPins
			switch {
			case errors.Is(err, sql.ErrNoRows):
				// None: one is created below, with the pins of the
				// chat's top level when conv is a thread of it.
				if pins, err = db.parentPins(ctx, tx, conv); err != nil {
					return err
				}
				if idle, err = db.sweptIdle(ctx, tx, conv, now); err != nil {
					return err
				}
			case err != nil:
				return err
			case db.ttl > 0 && now.Sub(s.LastAccess) > db.ttl:
				// Expired: the conversation starts over, the user's
				// /model choice does not (as with /new).
				pins = sessionPins{model: s.ModelPin, profile: s.ProfilePin}
				if idle, err = db.expiredIdle(ctx, tx, s, now); err != nil {
					return err
				}
				if err := db.endSession(ctx, tx, s.ID); err != nil {
					return err
				}
			default:
				s.LastAccess = now
				_, err = tx.ExecContext(ctx, `UPDATE sessions SET last_access = ? WHERE id = ?`, now.UnixMilli(), s.ID)
				return err
			}
			var ok bool
			if s, ok, err = db.createSession(ctx, tx, conv, pins); err != nil || ok {
				created, s.Idle = ok, idle
				return err
			}
			// Another transaction created the conversation's session
			// meanwhile: read it (locked) and touch it.
		}
	})
	if err != nil {
		return core.Session{}, false, fmt.Errorf("session of %s: %w", conv, err)
	}
	return s, created, nil
}

var _ core.FollowUpSessions = (*DB)(nil)

// ActiveSessionFollowUp implements core.FollowUpSessions: ActiveSession
// and FollowUp of the session in one statement when the session was
// used a moment ago. The follow-up is nil when it could not be read with
// the session.
func (db *DB) ActiveSessionFollowUp(ctx context.Context, conv core.ConversationKey) (core.Session, *core.FollowUp, error) {
	var fr followUpRow
	row := db.hot.QueryRowContext(ctx, `SELECT `+sessionColsS+`, `+followUpCols+` FROM sessions s
		LEFT JOIN replies r ON r.id = (SELECT MAX(l.id) FROM replies l WHERE l.session_id = s.id AND l.model <> '')
		WHERE s.conversation = ? AND s.active = TRUE`, append(followUpArgs(), conv.String())...)
	s, err := scanSession(scanBoth{row, fr.dest()})
	if err == nil {
		if age := db.now().Sub(s.LastAccess); age >= 0 && age < db.touchEvery() {
			f, err := fr.followUp(s.ID)
			if err != nil {
				return s, nil, err
			}
			return s, &f, nil
		}
	}
	read := int64(-1)
	if err == nil {
		read = s.ID // stale: the follow-up read holds if it is touched
	}
	s, created, err := db.activeSessionTx(ctx, conv)
	switch {
	case err != nil:
		return s, nil, err
	case created:
		return s, &core.FollowUp{}, nil // nothing answered in it yet
	case s.ID == read:
		f, err := fr.followUp(s.ID)
		if err != nil {
			return s, nil, err
		}
		return s, &f, nil
	}
	return s, nil, nil
}

// scanBoth scans a row into a session's columns and then into more.
type scanBoth struct {
	row  *sql.Row
	more []any
}

func (b scanBoth) Scan(dest ...any) error { return b.row.Scan(append(dest, b.more...)...) }

// touchEvery is how stale a session's last access may be before it is
// written again: a minute, or a tenth of the TTL when that is shorter.
func (db *DB) touchEvery() time.Duration {
	d := time.Minute
	if db.ttl > 0 {
		d = min(d, db.ttl/10)
	}
	return d
}

// NewSession implements core.SessionStore. Pins of the old session carry
// over: /new forgets the conversation, not the user's model choice. On
// PostgreSQL it locks the active row as activeSessionTx does (a touch
// meanwhile waits for it, or it for the touch, instead of one aborting),
// and a session another transaction created meanwhile is ended in turn.
func (db *DB) NewSession(ctx context.Context, conv core.ConversationKey) (core.Session, error) {
	var s core.Session
	err := db.txLocking(ctx, func(tx *txn) error {
		for {
			var modelPin, profilePin string
			var id int64
			err := tx.QueryRowContext(ctx, `SELECT id, model_pin, profile_pin FROM sessions WHERE conversation = ? AND active = TRUE`+db.d.forUpdate, conv.String()).Scan(&id, &modelPin, &profilePin)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err == nil {
				if err := db.endSession(ctx, tx, id); err != nil {
					return err
				}
			}
			var ok bool
			s, ok, err = db.createSession(ctx, tx, conv, sessionPins{model: modelPin, profile: profilePin})
			if err != nil || ok {
				return err
			}
			// Another transaction's new session is there: end it too.
		}
	})
	if err != nil {
		return core.Session{}, fmt.Errorf("new session for %s: %w", conv, err)
	}
	return s, nil
}

// createSession inserts conv's new active session. On PostgreSQL it is
// inserted only while conv has none: ok is false when another
// transaction's is there (committed while this one waited on it).
func (db *DB) createSession(ctx context.Context, tx *txn, conv core.ConversationKey, pins sessionPins) (s core.Session, ok bool, err error) {
	now := db.now()
	q := `INSERT INTO sessions (conversation, created_at, last_access, model_pin, profile_pin) VALUES (?, ?, ?, ?, ?)`
	if db.d.concurrent {
		q += ` ON CONFLICT (conversation) WHERE active = TRUE DO NOTHING`
	}
	var id int64
	err = tx.QueryRowContext(ctx, q+` RETURNING id`, conv.String(), now.UnixMilli(), now.UnixMilli(), pins.model, pins.profile).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Session{}, false, nil
	}
	return core.Session{ID: id, Conversation: conv, ModelPin: pins.model, ProfilePin: pins.profile,
		CreatedAt: time.UnixMilli(now.UnixMilli()), LastAccess: time.UnixMilli(now.UnixMilli())}, err == nil, err
}

// lastReplyAt is the time and model of a conversation's last reply, read
// by replies_conversation_created (migration 194) on both engines.
const lastReplyAt = `SELECT created_at, model FROM replies WHERE conversation = ? ORDER BY created_at DESC LIMIT 1`

// expiredIdle is how long s, expired, had been idle (core.Session.Idle),
// or 0 when it held no history: a session /new started (or the sweep
// made for a /model pin) and nobody used since forgets nothing, and the
// user who sent /new knows the conversation started over.
func (db *DB) expiredIdle(ctx context.Context, tx *txn, s core.Session, now time.Time) (time.Duration, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE session_id = ? LIMIT 1) m`, s.ID).Scan(&n); err != nil {
		return 0, fmt.Errorf("history of expired session %d: %w", s.ID, err)
	}
	if n == 0 {
		return 0, nil
	}
	return now.Sub(s.LastAccess), nil
}

// sweptIdle is how long conv has been idle when its previous session
// was deleted for being idle past the TTL (0 when it has none, or its
// last answer is more recent, or was no model's): the time since its
// last reply, which outlives the session. It runs only when a
// conversation has no session.
func (db *DB) sweptIdle(ctx context.Context, tx *txn, conv core.ConversationKey, now time.Time) (time.Duration, error) {
	if db.ttl <= 0 {
		return 0, nil
	}
	var last int64
	var model string
	switch err := tx.QueryRowContext(ctx, lastReplyAt, conv.String()).Scan(&last, &model); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("last reply of %s: %w", conv, err)
	}
	// A last reply no model wrote is a command's (/new's, /status') or a
	// schedule's text: after /new nothing was forgotten, and what came
	// before another command cannot be told apart here.
	if idle := now.Sub(time.UnixMilli(last)); model != "" && idle > db.ttl {
		return idle, nil
	}
	return 0, nil
}

// sessionPins are the /model choices a new session starts with.
type sessionPins struct{ model, profile string }

// parentPins are the pins of the active session of the chat conv is a
// thread of (none when conv is not a thread, or the chat's top level has
// no session): a Slack channel's or a Telegram forum's new threads start
// with the model chosen for the whole chat, as a slash command given in
// the channel before any thread chooses it.
func (db *DB) parentPins(ctx context.Context, tx *txn, conv core.ConversationKey) (sessionPins, error) {
	if conv.Thread == "" {
		return sessionPins{}, nil
	}
	parent := core.ConversationKey{Channel: conv.Channel, Chat: conv.Chat}
	var p sessionPins
	err := tx.QueryRowContext(ctx, `SELECT model_pin, profile_pin FROM sessions WHERE conversation = ? AND active = TRUE`, parent.String()).Scan(&p.model, &p.profile)
	if errors.Is(err, sql.ErrNoRows) {
		return sessionPins{}, nil
	}
	return p, err
}

func (db *DB) endSession(ctx context.Context, tx *txn, id int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE sessions SET active = FALSE, ended_at = ? WHERE id = ?`, db.ms(), id)
	return err
}

// Session returns a session by id.
func (db *DB) Session(ctx context.Context, id int64) (core.Session, error) {
	s, err := scanSession(db.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return s, core.Errorf(core.KindNotFound, "session %d not found", id)
	}
	return s, err
}

// SetPins sets a session's model and profile pins ("" = auto).
func (db *DB) SetPins(ctx context.Context, sessionID int64, modelPin, profilePin string) error {
	_, err := db.w.ExecContext(ctx, `UPDATE sessions SET model_pin = ?, profile_pin = ? WHERE id = ?`, modelPin, profilePin, sessionID)
	if err != nil {
		return fmt.Errorf("set pins of session %d: %w", sessionID, err)
	}
	return nil
}

// MessageCount implements core.SessionStore.
func (db *DB) MessageCount(ctx context.Context, sessionID int64) (int, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE session_id = ?`, sessionID).Scan(&n)
	return n, err
}

// History returns the session's newest limit messages, oldest first. A
// compaction summary (kept at the head of the history) is always
// returned first and does not count toward limit.
func (db *DB) History(ctx context.Context, sessionID int64, limit int) ([]core.ChatMessage, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT role, content, tool_calls, tool_call_id, attachments, name FROM `+historyFrom(limit)+` ORDER BY id`, sessionID, sessionID)
	if err != nil {
		return nil, fmt.Errorf("history of session %d: %w", sessionID, err)
	}
	out, err := scanHistory(rows, false)
	if err != nil {
		return nil, fmt.Errorf("history of session %d: %w", sessionID, err)
	}
	return out.msgs, nil
}

// HistoryAndMemories is History and HasMemories(owner) in one statement
// (the orchestrator asks both before every answer).
func (db *DB) HistoryAndMemories(ctx context.Context, sessionID int64, limit int, owner string) ([]core.ChatMessage, bool, error) {
	rows, err := db.hot.QueryContext(ctx, `SELECT hm.has, h.role, h.content, h.tool_calls, h.tool_call_id, h.attachments, h.name FROM (SELECT `+hasMemories+` AS has) hm
		LEFT JOIN `+historyFrom(limit)+` ON TRUE ORDER BY h.id`, owner, sessionID, sessionID)
	if err != nil {
		return nil, false, fmt.Errorf("history of session %d: %w", sessionID, err)
	}
	out, err := scanHistory(rows, true)
	if err != nil {
		return nil, false, fmt.Errorf("history of session %d: %w", sessionID, err)
	}
	return out.msgs, out.has, nil
}

// historyFrom is the history of a session (its two arguments: the
// session's id twice) as a derived table h, unordered.
func historyFrom(limit int) string {
	if limit <= 0 {
		limit = 1 << 30
	}
	// The limit is part of the query text: SQLite plans with a bound LIMIT
	// value, so rebinding it re-prepares the statement on every call
	// (callers use a handful of limits, each prepared once).
	return `(SELECT id, role, content, tool_calls, tool_call_id, attachments, name FROM messages WHERE session_id = ? AND summary = TRUE
		UNION ALL
		SELECT * FROM (SELECT id, role, content, tool_calls, tool_call_id, attachments, name FROM messages
			WHERE session_id = ? AND summary = FALSE ORDER BY id DESC LIMIT ` + strconv.Itoa(limit) + `) newest
		) h`
}

type historyRows struct {
	msgs []core.ChatMessage
	has  bool
}

// scanHistory reads history rows; withHas: each row starts with the
// "has memories" column, and a row without a message (NULL role) stands
// for an empty history.
func scanHistory(rows *sql.Rows, withHas bool) (historyRows, error) {
	defer rows.Close()
	var out historyRows
	// The destinations are shared by the rows (each Scan sets every one
	// of them).
	var role, content, callID, name sql.NullString
	var calls, atts sql.NullString
	dest := []any{&out.has, &role, &content, &calls, &callID, &atts, &name}
	if !withHas {
		dest = dest[1:]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return out, err
		}
		if !role.Valid {
			continue
		}
		var m core.ChatMessage
		m.Role, m.Content, m.ToolCallID, m.Name = core.Role(role.String), content.String, callID.String, name.String
		if err := decodeCalls(calls, &m); err != nil {
			return out, err
		}
		if atts.Valid && atts.String != "" {
			if err := json.Unmarshal([]byte(atts.String), &m.Attachments); err != nil {
				return out, fmt.Errorf("decode attachments: %w", err)
			}
		}
		out.msgs = append(out.msgs, m)
	}
	return out, rows.Err()
}

func decodeCalls(calls sql.NullString, m *core.ChatMessage) error {
	if calls.Valid && calls.String != "" {
		if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
			return fmt.Errorf("decode tool calls: %w", err)
		}
	}
	return nil
}

// insertMessages appends msgs to the session's history, in order, up to
// messagesPerInsert rows per statement (a reply's question and answer are
// one statement: on PostgreSQL, one round trip).
func insertMessages(ctx context.Context, tx *txn, sessionID, requestID int64, at int64, msgs []core.ChatMessage) error {
	for len(msgs) > 0 {
		n := min(len(msgs), messagesPerInsert)
		args, err := messageRows(sessionID, requestID, at, msgs[:n])
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insertMessagesQuery(n), args...); err != nil {
			return err
		}
		msgs = msgs[n:]
	}
	return nil
}

// messageRows is the arguments of history entries' rows, nine each
// (insertMessagesQuery's columns).
func messageRows(sessionID, requestID int64, at int64, msgs []core.ChatMessage) ([]any, error) {
	var req any
	if requestID != 0 {
		req = requestID
	}
	args := make([]any, 0, 9*len(msgs))
	for _, m := range msgs {
		var calls, atts any
		if len(m.ToolCalls) > 0 {
			b, err := json.Marshal(m.ToolCalls)
			if err != nil {
				return nil, err
			}
			calls = string(b)
		}
		if len(m.Attachments) > 0 {
			b, err := json.Marshal(m.Attachments)
			if err != nil {
				return nil, err
			}
			atts = string(b)
		}
		// An entry's text may come from outside (a document's text, a
		// tool's output, a model's words): PostgreSQL refuses a NUL byte
		// or broken UTF-8, and the reply would be refused with it.
		args = append(args, sessionID, req, string(m.Role), core.CleanText(m.Content), calls, core.CleanText(m.ToolCallID), atts, m.Name, at)
	}
	return args, nil
}

// messagesPerInsert bounds the rows of one insert of history entries (and
// so the statements prepared for them).
const messagesPerInsert = 8

// insertMessagesQuery inserts n history entries; their ids follow the
// order of the rows.
func insertMessagesQuery(n int) string {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	return `INSERT INTO messages (session_id, request_id, role, content, tool_calls, tool_call_id, attachments, name, created_at) VALUES ` +
		strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// AppendMessages appends history entries to a session outside a reply
// (compaction summaries, imports).
func (db *DB) AppendMessages(ctx context.Context, sessionID int64, msgs []core.ChatMessage) error {
	return db.tx(ctx, func(tx *txn) error {
		return insertMessages(ctx, tx, sessionID, 0, db.ms(), msgs)
	})
}
