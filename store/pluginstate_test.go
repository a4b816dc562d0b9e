package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestPluginState(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	db := openTest(t, Options{Now: c.Now})
	ctx := context.Background()

	if _, found, err := db.PluginStateGet(ctx, "notes", "a"); err != nil || found {
		t.Fatalf("get before set: found=%v err=%v", found, err)
	}
	for _, kv := range [][3]string{{"notes", "a", "1"}, {"notes", "b%", "2"}, {"notes", "b_x", "3"}, {"other", "a", "secret"}} {
		if err := db.PluginStateSet(ctx, kv[0], kv[1], kv[2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PluginStateSet(ctx, "notes", "a", "1b"); err != nil {
		t.Fatal(err)
	}
	t.Run("get", func(t *testing.T) {
		v, found, err := db.PluginStateGet(ctx, "notes", "a")
		if err != nil || !found || v != "1b" {
			t.Fatalf("get = %q %v %v, want 1b (overwritten)", v, found, err)
		}
		v, _, _ = db.PluginStateGet(ctx, "other", "a")
		if v != "secret" {
			t.Fatalf("other/a = %q: namespaces are mixed up", v)
		}
	})
	t.Run("keys", func(t *testing.T) {
		tests := []struct {
			plugin, prefix string
			want           []string
		}{
			{"notes", "", []string{"a", "b%", "b_x"}},
			{"notes", "b", []string{"b%", "b_x"}},
			{"notes", "b%", []string{"b%"}},  // % is literal
			{"notes", "b_", []string{"b_x"}}, // _ is literal
			{"other", "", []string{"a"}},
			{"nobody", "", []string{}},
		}
		for _, tt := range tests {
			got, err := db.PluginStateKeys(ctx, tt.plugin, tt.prefix)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Keys(%s, %q) = %v, %v; want %v", tt.plugin, tt.prefix, got, err, tt.want)
			}
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := db.PluginStateDelete(ctx, "notes", "a"); err != nil {
			t.Fatal(err)
		}
		if err := db.PluginStateDelete(ctx, "notes", "missing"); err != nil {
			t.Fatalf("deleting a missing key: %v", err)
		}
		if _, found, _ := db.PluginStateGet(ctx, "notes", "a"); found {
			t.Fatal("notes/a still there after delete")
		}
		if _, found, _ := db.PluginStateGet(ctx, "other", "a"); !found {
			t.Fatal("deleting notes/a removed other/a")
		}
	})
	t.Run("updated_at uses the clock", func(t *testing.T) {
		var at int64
		if err := db.r.QueryRowContext(ctx, `SELECT updated_at FROM plugin_state WHERE plugin_id='other' AND key='a'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at != c.Now().UnixMilli() {
			t.Fatalf("updated_at = %d, want %d", at, c.Now().UnixMilli())
		}
	})
	t.Run("invalid", func(t *testing.T) {
		if err := db.PluginStateSet(ctx, "", "k", "v"); core.ErrorKind(err) != core.KindInvalid {
			t.Errorf("empty plugin id: %v", err)
		}
		if _, _, err := db.PluginStateGet(ctx, "notes", ""); core.ErrorKind(err) != core.KindInvalid {
			t.Errorf("empty key: %v", err)
		}
		if _, err := db.PluginStateKeys(ctx, "", ""); core.ErrorKind(err) != core.KindInvalid {
			t.Errorf("keys with empty plugin id: %v", err)
		}
	})
}

func TestPluginStatePutQuota(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	q := core.PluginStateQuota{MaxKeys: 3, MaxBytes: 40}
	usage := func(plugin string) (int, int64) {
		t.Helper()
		k, b, err := db.PluginStateUsage(ctx, plugin)
		if err != nil {
			t.Fatal(err)
		}
		return k, b
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := db.PluginStatePut(ctx, "p", k, "1234", q); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	if k, b := usage("p"); k != 3 || b != 15 {
		t.Fatalf("usage = %d keys %d bytes, want 3 and 15", k, b)
	}
	t.Run("a fourth key is refused", func(t *testing.T) {
		err := db.PluginStatePut(ctx, "p", "d", "x", q)
		if !errors.Is(err, core.ErrPluginStateQuota) || !strings.Contains(err.Error(), "the limit is 3") {
			t.Fatalf("err = %v", err)
		}
		if _, found, _ := db.PluginStateGet(ctx, "p", "d"); found {
			t.Fatal("the refused key was written")
		}
	})
	t.Run("overwriting an existing key passes the key limit", func(t *testing.T) {
		if err := db.PluginStatePut(ctx, "p", "a", "12345678", q); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("growing past max_bytes is refused, shrinking is not", func(t *testing.T) {
		err := db.PluginStatePut(ctx, "p", "b", strings.Repeat("x", 30), q)
		if !errors.Is(err, core.ErrPluginStateQuota) {
			t.Fatalf("err = %v", err)
		}
		if err := db.PluginStatePut(ctx, "p", "b", "", q); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("usage follows every write path", func(t *testing.T) {
		if err := db.PluginStateDelete(ctx, "p", "c"); err != nil {
			t.Fatal(err)
		}
		if err := db.PluginStateSet(ctx, "p", "e", "xy"); err != nil {
			t.Fatal(err)
		}
		// a=8+1, b=0+1, e=2+1
		if k, b := usage("p"); k != 3 || b != 13 {
			t.Fatalf("usage = %d keys %d bytes, want 3 and 13", k, b)
		}
	})
	t.Run("another plugin has its own quota", func(t *testing.T) {
		if err := db.PluginStatePut(ctx, "other", "a", "1", q); err != nil {
			t.Fatal(err)
		}
		if k, _ := usage("other"); k != 1 {
			t.Fatalf("other has %d keys", k)
		}
	})
	t.Run("no quota", func(t *testing.T) {
		for i := range 5 {
			if err := db.PluginStatePut(ctx, "free", strings.Repeat("k", i+1), "v", core.PluginStateQuota{}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestPluginBinding(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	db := openTest(t, Options{Now: c.Now})
	ctx := context.Background()
	b, err := db.PluginBind(ctx, "notes", "/opt/p/notes", "aaaa")
	if err != nil || b.Path != "/opt/p/notes" || b.SHA256 != "aaaa" || !b.BoundAt.Equal(c.t) {
		t.Fatalf("first bind = %+v, %v", b, err)
	}
	c.t = c.t.Add(time.Hour)
	b, err = db.PluginBind(ctx, "notes", "/tmp/impostor", "bbbb")
	if err != nil || b.Path != "/opt/p/notes" || b.SHA256 != "aaaa" {
		t.Fatalf("second bind must return the first binding, got %+v, %v", b, err)
	}
	if list, err := db.PluginBindings(ctx); err != nil || len(list) != 1 || list[0].Name != "notes" {
		t.Fatalf("bindings = %+v, %v", list, err)
	}
	if ok, err := db.PluginUnbind(ctx, "notes"); !ok || err != nil {
		t.Fatalf("unbind = %v, %v", ok, err)
	}
	if ok, _ := db.PluginUnbind(ctx, "notes"); ok {
		t.Fatal("second unbind found a binding")
	}
	if b, _ := db.PluginBind(ctx, "notes", "/tmp/new", "cccc"); b.Path != "/tmp/new" {
		t.Fatalf("after unbind the name goes to the next binary, got %+v", b)
	}
	if _, err := db.PluginBind(ctx, "", "/x", "y"); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("empty name: %v", err)
	}
}
