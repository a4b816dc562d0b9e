package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/opentalon/opentalon/core"
)

// Lua KV: one private key-value namespace per Lua script. The lua
// package binds script to the script's file name; nothing here trusts a
// script to name it.

func checkLuaKey(script, key string) error {
	if script == "" {
		return core.Errorf(core.KindInvalid, "lua kv: empty script name")
	}
	if key == "" {
		return core.Errorf(core.KindInvalid, "lua kv: empty key")
	}
	return nil
}

// LuaKVGet returns the value of key in script's namespace; found=false
// when it is not set.
func (db *DB) LuaKVGet(ctx context.Context, script, key string) (value string, found bool, err error) {
	if err := checkLuaKey(script, key); err != nil {
		return "", false, err
	}
	err = db.r.QueryRowContext(ctx, `SELECT value FROM lua_kv WHERE script = ? AND key = ?`, script, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read lua kv %s/%q: %w", script, key, err)
	}
	return value, true, nil
}

// LuaKVSet stores value under key in script's namespace, with no quota.
func (db *DB) LuaKVSet(ctx context.Context, script, key, value string) error {
	return db.LuaKVPut(ctx, script, key, value, core.PluginStateQuota{})
}

// LuaKVPut stores value under key in script's namespace unless that
// takes the namespace past q (plugins.lua.limits.kv_max_keys and
// kv_max_bytes): a new key past MaxKeys, or more bytes past MaxBytes; a
// write that shrinks or keeps the size always passes. The refusal wraps
// core.ErrLuaKVQuota. The check and the write are one transaction.
func (db *DB) LuaKVPut(ctx context.Context, script, key, value string, q core.PluginStateQuota) error {
	if err := checkLuaKey(script, key); err != nil {
		return err
	}
	write := func(ctx context.Context, x interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}) error {
		_, err := x.ExecContext(ctx, `INSERT INTO lua_kv (script, key, value, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (script, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			script, key, db.d.bytes(value), db.ms())
		if err != nil {
			return fmt.Errorf("write lua kv %s/%q: %w", script, key, err)
		}
		return nil
	}
	if q.MaxKeys <= 0 && q.MaxBytes <= 0 {
		return write(ctx, db.w)
	}
	return db.tx(ctx, func(tx *txn) error {
		var keys, used int64
		err := tx.QueryRowContext(ctx, `SELECT keys, bytes FROM lua_kv_usage WHERE script = ?`, script).Scan(&keys, &used)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read lua kv usage of %s: %w", script, err)
		}
		var old int64
		exists := true
		err = tx.QueryRowContext(ctx, `SELECT octet_length(value) FROM lua_kv WHERE script = ? AND key = ?`, script, key).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			exists, err = false, nil
		}
		if err != nil {
			return fmt.Errorf("read lua kv %s/%q: %w", script, key, err)
		}
		size := int64(len(value))
		if !exists {
			size += int64(len(key))
			if q.MaxKeys > 0 && keys+1 > int64(q.MaxKeys) {
				return fmt.Errorf("%w: %s has %d keys, the limit (plugins.lua.limits.kv_max_keys) is %d", core.ErrLuaKVQuota, script, keys, q.MaxKeys)
			}
		} else {
			size -= old
		}
		if q.MaxBytes > 0 && size > 0 && used+size > q.MaxBytes {
			return fmt.Errorf("%w: %s uses %d bytes, this write adds %d, the limit (plugins.lua.limits.kv_max_bytes) is %d", core.ErrLuaKVQuota, script, used, size, q.MaxBytes)
		}
		return write(ctx, tx)
	})
}

// LuaKVUsage returns the number of keys and bytes (keys and values) of
// script's namespace.
func (db *DB) LuaKVUsage(ctx context.Context, script string) (keys int, bytes int64, err error) {
	err = db.r.QueryRowContext(ctx, `SELECT keys, bytes FROM lua_kv_usage WHERE script = ?`, script).Scan(&keys, &bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read lua kv usage of %s: %w", script, err)
	}
	return keys, bytes, nil
}

// LuaKVDelete removes key from script's namespace; deleting a missing
// key is not an error.
func (db *DB) LuaKVDelete(ctx context.Context, script, key string) error {
	if err := checkLuaKey(script, key); err != nil {
		return err
	}
	if _, err := db.w.ExecContext(ctx, `DELETE FROM lua_kv WHERE script = ? AND key = ?`, script, key); err != nil {
		return fmt.Errorf("delete lua kv %s/%q: %w", script, key, err)
	}
	return nil
}
