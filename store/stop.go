package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/opentalon/opentalon/core"
)

// stopChannel is the PostgreSQL notification channel of /stop: its
// payload is the conversation whose answer is to stop.
const stopChannel = "opentalon_stop"

// RequestStop implements core.Stopper: on PostgreSQL it notifies every
// replica (the one writing the answer stops it); on SQLite the one
// gateway has already stopped its own work.
func (db *DB) RequestStop(ctx context.Context, conv core.ConversationKey) error {
	if !db.d.concurrent {
		return nil
	}
	if _, err := db.w.ExecContext(ctx, `SELECT pg_notify(?, ?)`, stopChannel, conv.String()); err != nil {
		return fmt.Errorf("notify a stop of %s: %w", conv, err)
	}
	return nil
}

// StopRequests implements core.Stopper: the conversations a replica
// asked to stop (PostgreSQL LISTEN); nil on SQLite.
func (db *DB) StopRequests() <-chan core.ConversationKey {
	if db.wake == nil {
		return nil
	}
	db.wake.start()
	return db.wake.stops
}

// StoppedBefore says whether the last item of conv before id ended by
// /stop (its recorded cause is core.StopCause).
func (db *DB) StoppedBefore(ctx context.Context, conv core.ConversationKey, id int64) (bool, error) {
	var cause string
	err := db.r.QueryRowContext(ctx, `SELECT last_error FROM queue WHERE conversation = ? AND id < ? AND status = 'done' ORDER BY id DESC LIMIT 1`,
		conv.String(), id).Scan(&cause)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read what /stop stopped in %s: %w", conv, err)
	}
	return cause == core.StopCause, nil
}
