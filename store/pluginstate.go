package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Plugin state: one private key-value namespace per plugin. The caller
// (the plugins package's state service) binds pluginID to the plugin's
// connection; nothing here trusts a plugin to name it.

func checkPluginKey(pluginID, key string) error {
	if pluginID == "" {
		return core.Errorf(core.KindInvalid, "plugin state: empty plugin id")
	}
	if key == "" {
		return core.Errorf(core.KindInvalid, "plugin state: empty key")
	}
	return nil
}

// PluginStateGet returns the value of key in pluginID's namespace;
// found=false when it is not set.
func (db *DB) PluginStateGet(ctx context.Context, pluginID, key string) (value string, found bool, err error) {
	if err := checkPluginKey(pluginID, key); err != nil {
		return "", false, err
	}
	err = db.r.QueryRowContext(ctx, `SELECT value FROM plugin_state WHERE plugin_id = ? AND key = ?`, pluginID, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read plugin state %s/%q: %w", pluginID, key, err)
	}
	return value, true, nil
}

// PluginStateSet stores value under key in pluginID's namespace.
func (db *DB) PluginStateSet(ctx context.Context, pluginID, key, value string) error {
	if err := checkPluginKey(pluginID, key); err != nil {
		return err
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO plugin_state (plugin_id, key, value, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (plugin_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		pluginID, key, value, db.ms())
	if err != nil {
		return fmt.Errorf("write plugin state %s/%q: %w", pluginID, key, err)
	}
	return nil
}

// PluginStateDelete removes key from pluginID's namespace; deleting a
// missing key is not an error.
func (db *DB) PluginStateDelete(ctx context.Context, pluginID, key string) error {
	if err := checkPluginKey(pluginID, key); err != nil {
		return err
	}
	if _, err := db.w.ExecContext(ctx, `DELETE FROM plugin_state WHERE plugin_id = ? AND key = ?`, pluginID, key); err != nil {
		return fmt.Errorf("delete plugin state %s/%q: %w", pluginID, key, err)
	}
	return nil
}

// PluginStateKeys lists the keys of pluginID's namespace that start with
// prefix ("" = all), sorted.
func (db *DB) PluginStateKeys(ctx context.Context, pluginID, prefix string) ([]string, error) {
	if pluginID == "" {
		return nil, core.Errorf(core.KindInvalid, "plugin state: empty plugin id")
	}
	// A range on the primary key instead of LIKE, so '%' and '_' in the
	// prefix are literal.
	q := `SELECT key FROM plugin_state WHERE plugin_id = ? AND key >= ? ORDER BY key`
	rows, err := db.r.QueryContext(ctx, q, pluginID, prefix)
	if err != nil {
		return nil, fmt.Errorf("list plugin state of %s: %w", pluginID, err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list plugin state of %s: %w", pluginID, err)
		}
		if !strings.HasPrefix(k, prefix) {
			break
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}
