package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/opentalon/opentalon/core"
)

// A namespaced key-value table with a quota: plugin state (plugin_state
// by plugin_id) and the Lua KV (lua_kv by script). Triggers keep each
// namespace's keys and bytes in <table>_usage, so a check reads one row.
type kvSpace struct {
	table, owner string // the table and its namespace column
	what         string // how errors name it ("plugin state")
	refused      error  // the sentinel a refusal wraps
	keysKey      string // the config key of MaxKeys and MaxBytes ("" = none)
	bytesKey     string
}

// pluginStateSpace is plugin state's (plugins.tools.state).
func pluginStateSpace() kvSpace {
	return kvSpace{table: "plugin_state", owner: "plugin_id", what: "plugin state", refused: core.ErrPluginStateQuota}
}

// luaKVSpace is the Lua hooks' ctx.kv (plugins.lua.limits.kv_max_*).
func luaKVSpace() kvSpace {
	return kvSpace{table: "lua_kv", owner: "script", what: "lua kv", refused: core.ErrLuaKVQuota,
		keysKey: "plugins.lua.limits.kv_max_keys", bytesKey: "plugins.lua.limits.kv_max_bytes"}
}

// limit names a bound in a refusal: "the limit" and its config key.
func limit(key string) string {
	if key == "" {
		return "the limit"
	}
	return "the limit (" + key + ")"
}

// put stores value under key in ns unless that takes ns past q: a new
// key past MaxKeys, or more bytes past MaxBytes (a write that shrinks or
// keeps the size always passes). The check and the write are one
// transaction (serializable on PostgreSQL, so replicas racing at the
// quota store exactly its worth).
func (s kvSpace) put(ctx context.Context, db *DB, ns, key, value string, q core.PluginStateQuota) error {
	return db.tx(ctx, func(tx *txn) error {
		var keys, used int64
		err := tx.QueryRowContext(ctx, `SELECT keys, bytes FROM `+s.table+`_usage WHERE `+s.owner+` = ?`, ns).Scan(&keys, &used)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read %s usage of %s: %w", s.what, ns, err)
		}
		var old int64
		exists := true
		err = tx.QueryRowContext(ctx, `SELECT octet_length(value) FROM `+s.table+` WHERE `+s.owner+` = ? AND key = ?`, ns, key).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			exists, err = false, nil
		}
		if err != nil {
			return fmt.Errorf("read %s %s/%q: %w", s.what, ns, key, err)
		}
		size := int64(len(value))
		if !exists {
			size += int64(len(key))
			if q.MaxKeys > 0 && keys+1 > int64(q.MaxKeys) {
				return fmt.Errorf("%w: %s has %d keys, %s is %d", s.refused, ns, keys, limit(s.keysKey), q.MaxKeys)
			}
		} else {
			size -= old
		}
		if q.MaxBytes > 0 && size > 0 && used+size > q.MaxBytes {
			return fmt.Errorf("%w: %s uses %d bytes, this write adds %d, %s is %d", s.refused, ns, used, size, limit(s.bytesKey), q.MaxBytes)
		}
		return s.write(ctx, db, tx, ns, key, value)
	})
}

// write stores value under key in ns through x (the pool or a
// transaction), with no quota.
func (s kvSpace) write(ctx context.Context, db *DB, x interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, ns, key, value string) error {
	_, err := x.ExecContext(ctx, `INSERT INTO `+s.table+` (`+s.owner+`, key, value, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (`+s.owner+`, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		ns, key, db.d.bytes(value), db.ms())
	if err != nil {
		return fmt.Errorf("write %s %s/%q: %w", s.what, ns, key, err)
	}
	return nil
}
