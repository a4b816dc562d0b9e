package store

import (
	"context"
	"fmt"
)

// RequeueRunning implements core.QueueStore: it ends every lease now
// (their items are taken back by the next claim, as interruptions) and
// prunes finished rows past Options.QueueRetention. It returns how many
// items were running. (The gateway's start-up requeue; it goes with the
// engine's lease renewal, when SoleClaimer does this at the first claim.)
func (db *DB) RequeueRunning(ctx context.Context) (int, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE queue SET lease_until = 0 WHERE status = 'running'`)
	if err != nil {
		return 0, fmt.Errorf("requeue running: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := db.PruneQueue(ctx); err != nil {
		return int(n), err
	}
	return int(n), nil
}

// Running implements core.QueueStore: the lease token of every running
// item, by id (the gateway's orphan sweep, until it renews leases).
func (db *DB) Running(ctx context.Context) (map[int64]int64, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, lease FROM queue WHERE status = 'running' ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("running queue items: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, lease int64
		if err := rows.Scan(&id, &lease); err != nil {
			return nil, err
		}
		out[id] = lease
	}
	return out, rows.Err()
}
