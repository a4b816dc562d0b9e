package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/store/blobtest"
)

func TestOpsPlugin(t *testing.T) {
	bin := plugintest.Build(t, ".")
	os.WriteFile(filepath.Join(filepath.Dir(bin), "ops.json"), []byte(`{"users":["telegram:42"],"admins":["telegram:7"]}`), 0o600)
	c := plugintest.Start(t, bin, plugintest.Options{})
	for user, want := range map[string]core.AuthDecision{"42": core.AuthAllow, "7": core.AuthAdmin, "99": core.AuthDeny} {
		if d, err := c.Authorize("telegram", "1", user); err != nil || d != want {
			t.Errorf("authorize %s = %s %v; want %s", user, d, err, want)
		}
	}
	if d, _ := c.Authorize("slack", "1", "42"); d != core.AuthDeny {
		t.Errorf("the telegram user on slack = %s; want deny", d)
	}
	if got := c.Text("recent_alerts", nil); got != "No alerts." {
		t.Fatalf("alerts = %q", got)
	}
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	for i, kind := range []string{core.EventChannelDown, core.EventBudgetWarning} {
		if err := c.Notify(core.OpsEvent{Kind: kind, Subject: "s", Message: "m", At: at.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	got := c.Text("recent_alerts", nil)
	if lines := strings.Split(got, "\n"); len(lines) != 2 || !strings.Contains(lines[0], "budget_warning") || !strings.Contains(lines[1], "2026-05-01T09:00:00Z channel_down (s): m") {
		t.Fatalf("alerts = %q; want both, newest first", got)
	}
	blobtest.Run(t, c.Blobs())
}
