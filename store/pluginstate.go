package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

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
		pluginID, key, db.d.bytes(value), db.ms())
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

// PluginStatePut stores value under key in pluginID's namespace unless
// that takes the namespace past q: a new key past MaxKeys, or more bytes
// past MaxBytes (a write that shrinks or keeps the size always passes).
// The check and the write are one transaction.
func (db *DB) PluginStatePut(ctx context.Context, pluginID, key, value string, q core.PluginStateQuota) error {
	if err := checkPluginKey(pluginID, key); err != nil {
		return err
	}
	return pluginStateSpace().put(ctx, db, pluginID, key, value, q)
}

// PluginStateUsage returns the number of keys and bytes (keys and values)
// of pluginID's namespace.
func (db *DB) PluginStateUsage(ctx context.Context, pluginID string) (keys int, bytes int64, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT keys, bytes FROM plugin_state_usage WHERE plugin_id = ?`, pluginID).Scan(&keys, &bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read plugin state usage of %s: %w", pluginID, err)
	}
	return keys, bytes, nil
}

// PluginBind binds name to the binary at path with the given content
// hash unless name is bound already, and returns the binding in force:
// the caller compares it with the binary that asked.
func (db *DB) PluginBind(ctx context.Context, name, path, sha256 string) (core.PluginBinding, error) {
	if name == "" || path == "" || sha256 == "" {
		return core.PluginBinding{}, core.Errorf(core.KindInvalid, "plugin binding: empty name, path or hash")
	}
	var b core.PluginBinding
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO plugin_binding (name, path, sha256, bound_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, path, sha256, db.ms()); err != nil {
			return err
		}
		var ms int64
		if err := tx.QueryRowContext(ctx, `SELECT name, path, sha256, bound_at FROM plugin_binding WHERE name = ?`, name).Scan(&b.Name, &b.Path, &b.SHA256, &ms); err != nil {
			return err
		}
		b.BoundAt = time.UnixMilli(ms)
		return nil
	})
	if err != nil {
		return core.PluginBinding{}, fmt.Errorf("bind plugin name %s: %w", name, err)
	}
	return b, nil
}

// PluginBindings lists every binding, by name.
func (db *DB) PluginBindings(ctx context.Context) ([]core.PluginBinding, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT name, path, sha256, bound_at FROM plugin_binding ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list plugin bindings: %w", err)
	}
	defer rows.Close()
	var out []core.PluginBinding
	for rows.Next() {
		var b core.PluginBinding
		var ms int64
		if err := rows.Scan(&b.Name, &b.Path, &b.SHA256, &ms); err != nil {
			return nil, fmt.Errorf("list plugin bindings: %w", err)
		}
		b.BoundAt = time.UnixMilli(ms)
		out = append(out, b)
	}
	return out, rows.Err()
}

// PluginUnbind removes the binding of name, so the next binary that
// registers the name gets it (and its state); false when there was none.
func (db *DB) PluginUnbind(ctx context.Context, name string) (bool, error) {
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM plugin_binding WHERE name = ?`, name)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("unbind plugin name %s: %w", name, err)
	}
	return n > 0, nil
}
