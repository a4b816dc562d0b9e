package store

import (
	"context"
	"fmt"
	"time"
)

// UsageRecord is one LLM call in the usage ledger.
type UsageRecord struct {
	At           time.Time
	SessionID    int64
	Conversation string
	UserID       string
	Model        string
	Purpose      string
	InputTokens  int
	OutputTokens int
	CostUSD      float64
}

// RecordUsage appends one LLM call to the usage ledger.
func (db *DB) RecordUsage(ctx context.Context, u UsageRecord) error {
	if u.At.IsZero() {
		u.At = db.now()
	}
	if u.Purpose == "" {
		u.Purpose = "chat"
	}
	var sess any
	if u.SessionID != 0 {
		sess = u.SessionID
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO usage (at, session_id, conversation, user_id, model, purpose, input_tokens, output_tokens, cost_usd)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, u.At.UnixMilli(), sess, u.Conversation, u.UserID, u.Model, u.Purpose, u.InputTokens, u.OutputTokens, u.CostUSD)
	if err != nil {
		return fmt.Errorf("record usage: %w", err)
	}
	return nil
}
