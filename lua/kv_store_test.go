package lua

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestKVBytesOnBothEngines: a script's values are Lua strings, any bytes:
// a NUL byte and invalid UTF-8 round-trip through ctx.kv_set and
// ctx.kv_get on SQLite and on PostgreSQL. A key PostgreSQL cannot hold (a
// NUL byte, invalid UTF-8) is refused on both engines alike, with an error
// the script can catch naming the NUL byte; the request goes on.
func TestKVBytesOnBothEngines(t *testing.T) {
	const script = `
function pre_hook(ctx)
  local v = "a\0b\255\254" .. string.char(0)
  ctx:kv_set("odd", v)
  local back = ctx:kv_get("odd")
  ctx.metadata.roundtrip = tostring(back == v) .. " " .. #back
  for name, key in pairs({nulkey = "k\0ey", badkey = "k\255"}) do
    local ok, err = pcall(function() ctx:kv_set(key, "x") end)
    if ok then ctx.metadata[name] = "stored:" .. tostring(ctx:kv_get(key)) else ctx.metadata[name] = "refused: " .. tostring(err) end
    ok, err = pcall(function() return ctx:kv_get(key) end)
    if ok then ctx.metadata[name .. "_get"] = "read" else ctx.metadata[name .. "_get"] = "refused: " .. tostring(err) end
  end
  return ctx
end`
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			o := store.Options{}
			if engine == "postgres" {
				o.Postgres = &store.Postgres{DSN: pgtest.DSN(t)}
			}
			db, err := store.Open(context.Background(), t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			te := startEngine(t, map[string]string{"bytes.lua": script}, func(o *Options) { o.KV = db })
			res := te.pre(t, "x")
			if res.Metadata["roundtrip"] != "true 6" {
				t.Fatalf("round trip = %q; want the 6 bytes back unchanged", res.Metadata["roundtrip"])
			}
			for _, name := range []string{"nulkey", "badkey"} {
				for _, got := range []string{res.Metadata[name], res.Metadata[name+"_get"]} {
					if !strings.HasPrefix(got, "refused: ") || !strings.Contains(got, "ctx.kv_") || !strings.Contains(got, "NUL byte") {
						t.Fatalf("%s: %q; want it refused naming the NUL byte, as on the other engine", name, got)
					}
				}
			}
		})
	}
}

// TestKVQuotaStopsARunawayScript: a script that keeps a key per user (or
// per message) cannot fill the disk: past plugins.lua.limits.kv_max_keys
// ctx.kv_set raises an error the script can catch, naming the limit; an
// existing key is still overwritten. On the store and on MemKV (`lua
// test`) alike.
func TestKVQuotaStopsARunawayScript(t *testing.T) {
	const script = `
function pre_hook(ctx)
  local stored, err = 0, ""
  for i = 1, 10 do
    local ok, e = pcall(function() ctx:kv_set("user" .. i, "seen") end)
    if ok then stored = stored + 1 else err = tostring(e) break end
  end
  ctx:kv_set("user1", "seen again")
  ctx.metadata.stored = tostring(stored)
  ctx.metadata.err = err
  ctx.metadata.first = tostring(ctx:kv_get("user1"))
  return ctx
end`
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, kv := range map[string]KV{"store": db, "memkv": NewMemKV()} {
		t.Run(name, func(t *testing.T) {
			te := startEngine(t, map[string]string{"seen.lua": script}, func(o *Options) {
				o.KV, o.KVQuota = kv, core.PluginStateQuota{MaxKeys: 4, MaxBytes: 1 << 20}
			})
			res := te.pre(t, "x")
			if res.Metadata["stored"] != "4" || !strings.Contains(res.Metadata["err"], "kv_max_keys") || res.Metadata["first"] != "seen again" {
				t.Fatalf("stored %q, err %q, user1 = %q; want 4 keys, then an error naming kv_max_keys, and an overwrite that works",
					res.Metadata["stored"], res.Metadata["err"], res.Metadata["first"])
			}
		})
	}
}
