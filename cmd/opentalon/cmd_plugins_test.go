package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRunPlugins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := routingTestDB(t)
	var out bytes.Buffer
	if err := runPlugins(ctx, db, []string{"list"}, &out); err != nil || !strings.Contains(out.String(), "no plugin has registered yet") {
		t.Fatalf("empty list: %q, %v", out.String(), err)
	}
	if _, err := db.PluginBind(ctx, "notes", "/opt/plugins/notes", "0123456789abcdef0123"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runPlugins(ctx, db, []string{"list"}, &out); err != nil || !strings.Contains(out.String(), "notes  /opt/plugins/notes  0123456789ab…") {
		t.Fatalf("list: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := runPlugins(ctx, db, []string{"unbind", "notes"}, &out); err != nil || !strings.Contains(out.String(), "unbound notes") {
		t.Fatalf("unbind: %q, %v", out.String(), err)
	}
	if err := runPlugins(ctx, db, []string{"unbind", "notes"}, &out); err == nil || !strings.Contains(err.Error(), "opentalon plugins list") {
		t.Fatalf("unbind of a free name: %v", err)
	}
	var ue usageError
	if err := runPlugins(ctx, db, []string{"unbind"}, &out); !errors.As(err, &ue) {
		t.Fatalf("unbind without a name: %v", err)
	}
}
