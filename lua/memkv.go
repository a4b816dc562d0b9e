package lua

import (
	"context"
	"sync"
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

// LuaKVSet implements KV.
func (k *MemKV) LuaKVSet(_ context.Context, script, key, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m[script] == nil {
		k.m[script] = map[string]string{}
	}
	k.m[script][key] = value
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
