package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

var _ core.LeaseStore = (*DB)(nil)

// The leases of singleton work (migration 130; core.LeaseStore). Taking
// and renewing is one conditional upsert, the same on both engines: the
// row is written only when it is free, ran out, or is the caller's
// already, and RETURNING says whether it was. On PostgreSQL the upsert
// locks the row and evaluates its condition on the latest version, so of
// replicas racing for a lease that ran out exactly one gets it. The epoch
// stays for a renewal in time and is bumped otherwise.
//
// On SQLite the gateway holding the data directory is the only process
// (Options.SoleClaimer): a lease it does not hold is a dead process's, so
// it takes every lease at once, whoever the row names.
const acquireLease = `INSERT INTO leases (name, holder, epoch, expires) VALUES (?, ?, 1, ?)
	ON CONFLICT (name) DO UPDATE SET
		epoch = CASE WHEN leases.holder = excluded.holder AND leases.expires > ? THEN leases.epoch ELSE leases.epoch + 1 END,
		holder = excluded.holder, expires = excluded.expires
	WHERE leases.holder = excluded.holder OR leases.expires <= ? OR ?
	RETURNING epoch`

// Holder is the name this handle's replica takes leases under
// (Options.Holder).
func (db *DB) Holder() string { return db.holder }

// AcquireLease implements core.LeaseStore.
func (db *DB) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	if name == "" || holder == "" {
		return 0, false, fmt.Errorf("acquire lease %q for %q: a lease needs a name and a holder", name, holder)
	}
	now := db.ms()
	until := now + ttl.Milliseconds()
	if db.sole {
		// Held until this process ends (the next one takes it at once);
		// a sole holder does not renew (lease.Options.Sole), and the
		// status page reads it held.
		until = forever
	}
	var epoch int64
	err := db.w.QueryRowContext(ctx, acquireLease, name, holder, until, now, now, db.sole).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return epoch, true, nil
}

// ReleaseLease implements core.LeaseStore.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string, epoch int64) error {
	if _, err := db.w.ExecContext(ctx, `UPDATE leases SET holder = '', expires = 0 WHERE name = ? AND holder = ? AND epoch = ?`, name, holder, epoch); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaseData implements core.LeaseStore.
func (db *DB) LeaseData(ctx context.Context, name string) ([]byte, error) {
	var b []byte
	err := db.w.QueryRowContext(ctx, `SELECT data FROM leases WHERE name = ?`, name).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && len(b) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", name, err)
	}
	return b, nil
}

// SetLeaseData implements core.LeaseStore.
func (db *DB) SetLeaseData(ctx context.Context, name, holder string, epoch int64, data []byte) error {
	if len(data) > core.MaxLeaseData {
		return fmt.Errorf("lease %s: data of %d bytes is over the limit of %d", name, len(data), core.MaxLeaseData)
	}
	if data == nil {
		data = []byte{}
	}
	res, err := db.w.ExecContext(ctx, `UPDATE leases SET data = ? WHERE name = ? AND holder = ? AND epoch = ? AND expires > ?`,
		data, name, holder, epoch, db.ms())
	if err != nil {
		return fmt.Errorf("write lease %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("write lease %s: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("write lease %s (epoch %d): %w", name, epoch, core.ErrLeaseNotHeld)
	}
	return nil
}

// Leases implements core.LeaseStore.
func (db *DB) Leases(ctx context.Context) ([]core.LeaseInfo, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT name, holder, epoch, expires FROM leases ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	defer rows.Close()
	var out []core.LeaseInfo
	for rows.Next() {
		var l core.LeaseInfo
		var exp int64
		if err := rows.Scan(&l.Name, &l.Holder, &l.Epoch, &exp); err != nil {
			return nil, fmt.Errorf("list leases: %w", err)
		}
		l.Expires = time.UnixMilli(exp)
		out = append(out, l)
	}
	return out, rows.Err()
}
