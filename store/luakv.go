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

// LuaKVSet stores value under key in script's namespace.
func (db *DB) LuaKVSet(ctx context.Context, script, key, value string) error {
	if err := checkLuaKey(script, key); err != nil {
		return err
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO lua_kv (script, key, value, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (script, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		script, key, db.d.bytes(value), db.ms())
	if err != nil {
		return fmt.Errorf("write lua kv %s/%q: %w", script, key, err)
	}
	return nil
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
