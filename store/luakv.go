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
	if q.MaxKeys <= 0 && q.MaxBytes <= 0 {
		return luaKVSpace().write(ctx, db, db.w, script, key, value)
	}
	return luaKVSpace().put(ctx, db, script, key, value, q)
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
