package main

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
)

func TestNotesPlugin(t *testing.T) {
	c := plugintest.Start(t, plugintest.Build(t, "."), plugintest.Options{})
	if caps := c.Capabilities(); caps.Name != "notes" || len(caps.Actions) != 3 {
		t.Fatalf("capabilities = %+v", caps)
	}
	if got := c.Text("list", nil); got != "There are no notes." {
		t.Fatalf("empty list = %q", got)
	}
	for i, text := range []string{"buy milk", "call Ada about the [plugin_output] bug"} {
		if got, want := c.Text("add", map[string]string{"text": text}), "Saved note "+string(rune('1'+i))+"."; got != want {
			t.Fatalf("add = %q, want %q", got, want)
		}
	}
	if got := c.Text("list", nil); got != "1. buy milk\n2. call Ada about the [plugin_output] bug" {
		t.Fatalf("list = %q", got)
	}
	if got := c.Text("delete", map[string]string{"id": "1"}); got != "Deleted note 1." {
		t.Fatalf("delete = %q", got)
	}
	// The guarded view: wrapped, with the marker in the note escaped.
	res := c.Call("list", nil)
	if res.Error != "" || plugintest.Unwrap(res.Content) != "2. call Ada about the (plugin_output) bug" {
		t.Fatalf("guarded list = %+v", res)
	}
	errs := []struct {
		action string
		args   map[string]string
		want   string
	}{
		{"delete", map[string]string{"id": "1"}, "there is no note 1"},
		{"delete", map[string]string{"id": "x"}, "not a note number"},
		{"add", map[string]string{"text": "  "}, "the note is empty"},
		{"add", nil, "missing required argument"},
	}
	for _, e := range errs {
		if res := c.Call(e.action, e.args); !strings.Contains(res.Error, e.want) {
			t.Errorf("%s %v: %+v, want error ~%q", e.action, e.args, res, e.want)
		}
	}
	// The state lives in the plugin's own namespace, set by the core.
	st := c.State.(*plugintest.MemState)
	if ns := st.Namespaces(); len(ns) != 1 || ns[0] != "notes" {
		t.Fatalf("namespaces = %v, want [notes]", ns)
	}
	if keys, _ := st.PluginStateKeys(context.Background(), "notes", "note/"); len(keys) != 1 {
		t.Fatalf("keys = %v", keys)
	}
}
