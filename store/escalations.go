package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
