package store

import (
	"context"
	"slices"
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
