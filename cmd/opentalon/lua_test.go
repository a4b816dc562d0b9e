package main

import (
	"testing"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// TestLuaOptionsCarryTheKVQuota: plugins.lua.limits.kv_max_keys and
// kv_max_bytes reach the engine, the defaults and a config's own.
func TestLuaOptionsCarryTheKVQuota(t *testing.T) {
	l := config.Default().Plugins.Lua
	if got := luaOptions(l, nil, nil, nil).KVQuota; got != (core.PluginStateQuota{MaxKeys: 10000, MaxBytes: 16 << 20}) {
		t.Errorf("default quota = %+v; want 10000 keys and 16 MiB", got)
	}
	l.Limits.KVMaxKeys, l.Limits.KVMaxBytes = 0, 1234
	if got := luaOptions(l, nil, nil, nil).KVQuota; got != (core.PluginStateQuota{MaxBytes: 1234}) {
		t.Errorf("configured quota = %+v; want no key bound and 1234 bytes", got)
	}
}
