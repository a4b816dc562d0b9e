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
		sessionID, st.Question, string(models), db.ms())
	if err != nil {
		return fmt.Errorf("save escalation of session %d: %w", sessionID, err)
	}
	return nil
}

// FollowUp returns what the escalator reads to judge a message of the
// session, in one statement (routing's followUpReader). Last carries the
// answer's id, model, task type, session and creation time only.
func (db *DB) FollowUp(ctx context.Context, sessionID int64) (core.FollowUp, error) {
	var f core.FollowUp
	var r core.Reply
	var created int64
	var models string
	err := db.r.QueryRowContext(ctx, `SELECT r.id, r.model, r.task_type, r.created_at,
		COALESCE((SELECT m.content FROM messages m WHERE m.session_id = r.session_id AND m.summary = FALSE AND m.role = 'user' ORDER BY m.id DESC LIMIT 1), ''),
		COALESCE((SELECT e.question FROM escalations e WHERE e.session_id = r.session_id), ''),
		COALESCE((SELECT e.models FROM escalations e WHERE e.session_id = r.session_id), ''),
		EXISTS (SELECT 1 FROM signals s WHERE s.reply_id = r.id AND s.kind <> ? AND s.kind <> ? AND (s.kind <> ? OR s.polarity < 0))
		FROM replies r WHERE r.session_id = ? AND r.model <> '' ORDER BY r.id DESC LIMIT 1`,
		string(core.SignalExplicit), string(core.SignalAbandoned), string(core.SignalReaction), sessionID).
		Scan(&r.ID, &r.Model, &r.TaskType, &created, &f.Question, &f.Escalation.Question, &models, &f.Judged)
	if errors.Is(err, sql.ErrNoRows) {
		return core.FollowUp{}, nil
	}
	if err != nil {
		return f, fmt.Errorf("follow-up of session %d: %w", sessionID, err)
	}
	r.SessionID, r.CreatedAt = sessionID, time.UnixMilli(created)
	f.Last = &r
	if models != "" {
		if err := json.Unmarshal([]byte(models), &f.Escalation.Models); err != nil {
			return f, fmt.Errorf("escalation of session %d: models: %w", sessionID, err)
		}
	}
	return f, nil
}
