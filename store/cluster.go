package store

import (
	"context"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// RegisterReplica records r (a start, or a heartbeat when it is
// recorded already: the heartbeat time is r.Heartbeat).
func (db *DB) RegisterReplica(ctx context.Context, r core.Replica) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO replicas (id, host, version, config_hash, started, heartbeat, stopped) VALUES (?, ?, ?, ?, ?, ?, 0)
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, version = excluded.version, config_hash = excluded.config_hash,
			started = excluded.started, heartbeat = excluded.heartbeat, stopped = 0`,
		r.ID, r.Host, r.Version, r.ConfigHash, r.Started.UnixMilli(), r.Heartbeat.UnixMilli())
	if err != nil {
		return fmt.Errorf("register replica %s: %w", r.ID, err)
	}
	return nil
}

// ReplicaHeartbeat records that replica id is alive at now.
func (db *DB) ReplicaHeartbeat(ctx context.Context, id string, now time.Time) error {
	if _, err := db.w.ExecContext(ctx, `UPDATE replicas SET heartbeat = ? WHERE id = ?`, now.UnixMilli(), id); err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	return nil
}

// ReplicaStopped records a graceful stop of replica id at now.
func (db *DB) ReplicaStopped(ctx context.Context, id string, now time.Time) error {
	if _, err := db.w.ExecContext(ctx, `UPDATE replicas SET stopped = ?, heartbeat = ? WHERE id = ?`, now.UnixMilli(), now.UnixMilli(), id); err != nil {
		return fmt.Errorf("replica stopped: %w", err)
	}
	return nil
}

// Replicas lists the replicas whose last heartbeat is after since, by id.
func (db *DB) Replicas(ctx context.Context, since time.Time) ([]core.Replica, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, host, version, config_hash, started, heartbeat, stopped FROM replicas WHERE heartbeat > ? ORDER BY id`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	defer rows.Close()
	var out []core.Replica
	for rows.Next() {
		var r core.Replica
		var started, hb, stopped int64
		if err := rows.Scan(&r.ID, &r.Host, &r.Version, &r.ConfigHash, &started, &hb, &stopped); err != nil {
			return nil, fmt.Errorf("list replicas: %w", err)
		}
		r.Started, r.Heartbeat = time.UnixMilli(started), time.UnixMilli(hb)
		if stopped > 0 {
			r.Stopped = time.UnixMilli(stopped)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ClaimNotice claims the operator notice key for ttl: true for the first
// replica to claim it (it sends the notice), false while the claim of
// another (or its own earlier one) lasts. One conditional upsert.
func (db *DB) ClaimNotice(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	now := db.ms()
	rows, err := db.w.QueryContext(ctx, `INSERT INTO notices (key, until) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET until = excluded.until WHERE notices.until <= ?
		RETURNING key`, key, now+ttl.Milliseconds(), now)
	if err != nil {
		return false, fmt.Errorf("claim notice: %w", err)
	}
	defer rows.Close()
	claimed := rows.Next()
	return claimed, rows.Err()
}

// PruneCluster deletes the notices that ended and the replicas not heard
// from since before (maintenance).
func (db *DB) PruneCluster(ctx context.Context, before time.Time) error {
	if _, err := db.w.ExecContext(ctx, `DELETE FROM notices WHERE until <= ?`, db.ms()); err != nil {
		return fmt.Errorf("prune notices: %w", err)
	}
	if _, err := db.w.ExecContext(ctx, `DELETE FROM replicas WHERE heartbeat < ?`, before.UnixMilli()); err != nil {
		return fmt.Errorf("prune replicas: %w", err)
	}
	return nil
}
