package store

import (
	"context"
	"fmt"

	"github.com/opentalon/opentalon/core"
)

// The values admins set in chat (migration 161): one row per config key
// they override, read whole by the router (a handful of rows) and
// written one at a time.

// Settings returns every setting, by key.
func (db *DB) Settings(ctx context.Context) ([]core.Setting, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT key, value, updated_at, updated_by FROM settings ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	defer rows.Close()
	var out []core.Setting
	for rows.Next() {
		var s core.Setting
		var at int64
		if err := rows.Scan(&s.Key, &s.Value, &at, &s.UpdatedBy); err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		s.UpdatedAt = msTime(at)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	return out, nil
}

// SetSetting stores s, replacing the value of its key (its time defaults
// to now).
func (db *DB) SetSetting(ctx context.Context, s core.Setting) error {
	if s.Key == "" {
		return core.Errorf(core.KindInvalid, "setting: the key is required")
	}
	at := s.UpdatedAt
	if at.IsZero() {
		at = db.now()
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO settings (key, value, updated_at, updated_by) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
		s.Key, s.Value, at.UnixMilli(), s.UpdatedBy)
	if err != nil {
		return fmt.Errorf("store setting %s: %w", s.Key, err)
	}
	return nil
}

// DeleteSetting drops the setting of key (the config's value applies
// again); it reports whether there was one.
func (db *DB) DeleteSetting(ctx context.Context, key string) (bool, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM settings WHERE key = ?`, key)
	if err != nil {
		return false, fmt.Errorf("drop setting %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("drop setting %s: %w", key, err)
	}
	return n > 0, nil
}
