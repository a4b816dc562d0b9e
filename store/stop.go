package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/opentalon/opentalon/core"
)

// stopChannel is the PostgreSQL notification channel of /stop: its
// payload is the holder of the gateway that asked (Options.Holder), a
// newline, and the conversation whose answer is to stop.
const stopChannel = "opentalon_stop"

// RequestStop implements core.Stopper: on PostgreSQL it notifies the
// other replicas (the one writing the answer stops it; this one's
// gateway has stopped its own work already); on SQLite the one gateway
// has.
func (db *DB) RequestStop(ctx context.Context, conv core.ConversationKey) error {
	if !db.d.concurrent {
		return nil
	}
	if _, err := db.w.ExecContext(ctx, `SELECT pg_notify(?, ?)`, stopChannel, db.holder+"\n"+conv.String()); err != nil {
		return fmt.Errorf("notify a stop of %s: %w", conv, err)
	}
	return nil
}

// StopRequests implements core.Stopper: the conversations another
// replica asked to stop (PostgreSQL LISTEN; this one's own requests are
// not received: its gateway stopped its work before asking); nil on
// SQLite.
func (db *DB) StopRequests() <-chan core.ConversationKey {
	if db.wake == nil {
		return nil
	}
	db.wake.start()
	return db.wake.stops
}

// stopScan bounds the items before a /stop that StoppedBefore reads.
const stopScan = 10

// StoppedBefore says whether /stop (queue item id of conv) stopped
// something: the last item of conv before it ended by /stop (its recorded
// cause is core.StopCause), or one before it did while every item after
// it ended once /stop was queued (a message sent after the stopped one,
// a reaction, a firing: each answered between the stop and /stop's turn).
func (db *DB) StoppedBefore(ctx context.Context, conv core.ConversationKey, id int64) (bool, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT last_error, updated_at >= (SELECT created_at FROM queue WHERE id = ?) FROM queue
		WHERE conversation = ? AND id < ? AND status = 'done' ORDER BY id DESC LIMIT ?`, id, conv.String(), id, stopScan)
	if err != nil {
		return false, fmt.Errorf("read what /stop stopped in %s: %w", conv, err)
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		var cause string
		var after sql.NullBool
		if err := rows.Scan(&cause, &after); err != nil {
			return false, fmt.Errorf("read what /stop stopped in %s: %w", conv, err)
		}
		// An item before the last that ended before /stop was queued was
		// stopped by an earlier /stop, and so were the ones before it.
		if cause == core.StopCause && (i == 0 || after.Bool) {
			return true, nil
		}
		if !after.Bool {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read what /stop stopped in %s: %w", conv, err)
	}
	return false, nil
}
