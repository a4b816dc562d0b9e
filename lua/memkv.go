package lua

import (
	"context"
	"fmt"
	"sync"

	"github.com/opentalon/opentalon/core"
)

// MemKV is a KV in memory: `opentalon lua test` uses it so a trial run
// does not write into the gateway's database. Safe for concurrent use.
type MemKV struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

var _ KV = (*MemKV)(nil)

// NewMemKV returns an empty MemKV.
func NewMemKV() *MemKV { return &MemKV{m: map[string]map[string]string{}} }

// LuaKVGet implements KV.
func (k *MemKV) LuaKVGet(_ context.Context, script, key string) (string, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[script][key]
	return v, ok, nil
}

// LuaKVSet stores value under key, with no quota.
func (k *MemKV) LuaKVSet(ctx context.Context, script, key, value string) error {
	return k.LuaKVPut(ctx, script, key, value, core.PluginStateQuota{})
}

// LuaKVPut implements KV, with the quota counted as the store counts it
// (keys and values in bytes).
func (k *MemKV) LuaKVPut(_ context.Context, script, key, value string, q core.PluginStateQuota) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	ns := k.m[script]
	if ns == nil {
		ns = map[string]string{}
		k.m[script] = ns
	}
	old, exists := ns[key]
	size := int64(len(value)) - int64(len(old))
	if !exists {
		size += int64(len(key))
		if q.MaxKeys > 0 && len(ns)+1 > q.MaxKeys {
			return fmt.Errorf("%w: %s has %d keys, the limit (plugins.lua.limits.kv_max_keys) is %d", core.ErrLuaKVQuota, script, len(ns), q.MaxKeys)
		}
	}
	if q.MaxBytes > 0 && size > 0 {
		var used int64
		for kk, vv := range ns {
			used += int64(len(kk) + len(vv))
		}
		if used+size > q.MaxBytes {
			return fmt.Errorf("%w: %s uses %d bytes, this write adds %d, the limit (plugins.lua.limits.kv_max_bytes) is %d", core.ErrLuaKVQuota, script, used, size, q.MaxBytes)
		}
	}
	ns[key] = value
	return nil
}

// LuaKVDelete implements KV.
func (k *MemKV) LuaKVDelete(_ context.Context, script, key string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m[script], key)
	return nil
}

// Snapshot returns a copy of script's namespace.
func (k *MemKV) Snapshot(script string) map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]string{}
	for key, v := range k.m[script] {
		out[key] = v
	}
	return out
}
