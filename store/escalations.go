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

// Escalation returns a session's escalation state (the zero state when
// there is none).
func (db *DB) Escalation(ctx context.Context, sessionID int64) (core.EscalationState, error) {
	var st core.EscalationState
	var models string
	err := db.r.QueryRowContext(ctx, `SELECT question, models FROM escalations WHERE session_id = ?`, sessionID).
		Scan(&st.Question, &models)
	if errors.Is(err, sql.ErrNoRows) {
		return core.EscalationState{}, nil
	}
	if err != nil {
		return st, fmt.Errorf("escalation of session %d: %w", sessionID, err)
	}
	if err := json.Unmarshal([]byte(models), &st.Models); err != nil {
		return st, fmt.Errorf("escalation of session %d: models: %w", sessionID, err)
	}
	return st, nil
}

// SaveEscalation replaces a session's escalation state: one row per
// session, so it stays bounded.
func (db *DB) SaveEscalation(ctx context.Context, sessionID int64, st core.EscalationState) error {
	models, err := json.Marshal(st.Models)
	if err != nil {
		return err
	}
	if st.Models == nil {
		models = []byte("[]")
	}
	_, err = db.w.ExecContext(ctx, `INSERT INTO escalations (session_id, question, models, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (session_id) DO UPDATE SET question = excluded.question, models = excluded.models, updated_at = excluded.updated_at`,
		sessionID, core.CleanText(st.Question), string(models), db.ms())
	if err != nil {
		return fmt.Errorf("save escalation of session %d: %w", sessionID, err)
	}
	return nil
}

// followUpCols are FollowUp's columns of the session's last answer r
// (their three arguments: the signal kinds that do not judge an answer,
// or only when negative). The queue item of the answer's request (by
// its key) says who asked.
const followUpCols = `r.id, r.model, r.task_type, r.created_at, r.request_id,
		COALESCE((SELECT q.payload FROM queue q WHERE q.id = r.request_id), ''),
		COALESCE((SELECT m.content FROM messages m WHERE m.session_id = r.session_id AND m.summary = FALSE AND m.role = 'user' ORDER BY m.id DESC LIMIT 1), ''),
		COALESCE((SELECT e.question FROM escalations e WHERE e.session_id = r.session_id), ''),
		COALESCE((SELECT e.models FROM escalations e WHERE e.session_id = r.session_id), ''),
		EXISTS (SELECT 1 FROM signals s WHERE s.reply_id = r.id AND s.kind <> ? AND s.kind <> ? AND (s.kind <> ? OR s.polarity < 0))`

func followUpArgs() []any {
	return []any{string(core.SignalExplicit), string(core.SignalAbandoned), string(core.SignalReaction)}
}

// followUpRow receives followUpCols; the answer's columns are NULL when
// a join found none.
type followUpRow struct {
	id, created, request  sql.NullInt64
	model, task           sql.NullString
	asker                 sql.NullString
	question, esc, models string
	judged                bool
}

func (f *followUpRow) dest() []any {
	return []any{&f.id, &f.model, &f.task, &f.created, &f.request, &f.asker, &f.question, &f.esc, &f.models, &f.judged}
}

func (f *followUpRow) followUp(sessionID int64) (core.FollowUp, error) {
	if !f.id.Valid {
		return core.FollowUp{}, nil
	}
	out := core.FollowUp{Question: f.question, Judged: f.judged, Escalation: core.EscalationState{Question: f.esc}}
	out.Last = &core.Reply{ID: f.id.Int64, RequestID: f.request.Int64, Model: f.model.String, TaskType: f.task.String, SessionID: sessionID, CreatedAt: time.UnixMilli(f.created.Int64)}
	if f.asker.String != "" {
		// A payload that does not decode leaves the asker unknown: judged
		// as before, rather than failing every message after it.
		var p payload
		if json.Unmarshal([]byte(f.asker.String), &p) == nil {
			if in, ok := p.sender(); ok {
				out.Asker = &in
			}
		}
	}
	if f.models != "" {
		if err := json.Unmarshal([]byte(f.models), &out.Escalation.Models); err != nil {
			return out, fmt.Errorf("escalation of session %d: models: %w", sessionID, err)
		}
	}
	return out, nil
}

// FollowUp returns what the escalator reads to judge a message of the
// session, in one statement (routing's followUpReader). Last carries the
// answer's id, request, model, task type, session and creation time only.
func (db *DB) FollowUp(ctx context.Context, sessionID int64) (core.FollowUp, error) {
	var row followUpRow
	err := db.r.QueryRowContext(ctx, `SELECT `+followUpCols+`
		FROM replies r WHERE r.session_id = ? AND r.model <> '' ORDER BY r.id DESC LIMIT 1`,
		append(followUpArgs(), sessionID)...).Scan(row.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return core.FollowUp{}, nil
	}
	if err != nil {
		return core.FollowUp{}, fmt.Errorf("follow-up of session %d: %w", sessionID, err)
	}
	return row.followUp(sessionID)
}

// LastFailedMessage returns the newest message of conv given up for good
// (status failed) after the time after, for /retry after an apology; ok
// is false when there is none. A message given up for its interrupted
// attempts (the poison guard) is left out: running it again may crash
// the process again.
func (db *DB) LastFailedMessage(ctx context.Context, conv core.ConversationKey, after time.Time) (in core.Inbound, ok bool, err error) {
	var raw string
	err = db.r.QueryRowContext(ctx, `SELECT payload FROM queue WHERE status = 'failed' AND updated_at > ? AND conversation = ? AND kind = ?
		AND last_error NOT LIKE '%gave up after % interrupted attempts%' ORDER BY id DESC LIMIT 1`,
		after.UnixMilli(), conv.String(), string(core.EventMessage)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return in, false, nil
	}
	if err != nil {
		return in, false, fmt.Errorf("last failed message of %s: %w", conv, err)
	}
	var p payload
	if err := decodePayload(core.EventMessage, raw, &p); err != nil {
		return in, false, fmt.Errorf("last failed message of %s: %w", conv, err)
	}
	return *p.Message, true, nil
}

// RequestSender returns who sent request id, as its queue item says: the
// message (its user, name, whether it was private and its origin); for a
// reaction the reacting user, with ReplyTo the message reacted to (the
// reaction does not say whether its chat is private: the message that
// message answered does); for a schedule's firing the message it stands
// for (Firing.Inbound: its creator, Origin schedule, Private as the
// schedule was made). ok is false when the item is gone (finished items
// are pruned after state.retention).
// /retry and a 👎 in a group re-answer only for the sender of the
// question answered.
func (db *DB) RequestSender(ctx context.Context, id int64) (in core.Inbound, ok bool, err error) {
	var kind, raw string
	err = db.r.QueryRowContext(ctx, `SELECT kind, payload FROM queue WHERE id = ?`, id).Scan(&kind, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return in, false, nil
	}
	if err != nil {
		return in, false, fmt.Errorf("sender of request %d: %w", id, err)
	}
	var p payload
	if err := decodePayload(core.EventKind(kind), raw, &p); err != nil {
		return in, false, fmt.Errorf("sender of request %d: %w", id, err)
	}
	in, ok = p.sender()
	return in, ok, nil
}

// sender is who sent the queue item p holds (RequestSender).
func (p payload) sender() (core.Inbound, bool) {
	switch {
	case p.Message != nil:
		return *p.Message, true
	case p.Reaction != nil:
		return core.Inbound{Conversation: p.Reaction.Conversation, UserID: p.Reaction.UserID, ReplyTo: p.Reaction.MessageID}, true
	case p.Firing != nil:
		return p.Firing.Inbound(p.Firing.Prompt), true
	}
	return core.Inbound{}, false
}
