package lua

import (
	"context"
	"strings"
	"testing"

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
