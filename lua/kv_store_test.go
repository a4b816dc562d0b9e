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
// ctx.kv_get on SQLite and on PostgreSQL. A key PostgreSQL cannot hold is
// refused with an error the script can catch, naming the NUL byte; the
// request goes on.
func TestKVBytesOnBothEngines(t *testing.T) {
	const script = `
function pre_hook(ctx)
  local v = "a\0b\255\254" .. string.char(0)
  ctx:kv_set("odd", v)
  local back = ctx:kv_get("odd")
  ctx.metadata.roundtrip = tostring(back == v) .. " " .. #back
  local ok, err = pcall(function() ctx:kv_set("k\0ey", "x") end)
  if ok then ctx.metadata.nulkey = "stored:" .. tostring(ctx:kv_get("k\0ey")) else ctx.metadata.nulkey = "refused: " .. tostring(err) end
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
			got := res.Metadata["nulkey"]
			switch {
			case got == "stored:x":
			case strings.HasPrefix(got, "refused: ") && strings.Contains(got, "ctx.kv_set") && strings.Contains(got, "NUL byte"):
			default:
				t.Fatalf("a key with a NUL byte: %q; want it stored or refused naming the NUL byte", got)
			}
			if engine == "postgres" && got == "stored:x" {
				t.Fatal("PostgreSQL stored a TEXT key with a NUL byte")
			}
		})
	}
}
