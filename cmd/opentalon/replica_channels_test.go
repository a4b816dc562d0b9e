package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestReplicaKeepsAPluginScheduleForAnotherChannel: a replica whose
// config does not run Slack (replicas' configs may differ) keeps a
// plugin's schedule that posts to Slack: another replica may run it, and
// the schedules are the cluster's. On SQLite, one process, it is refused
// as before.
func TestReplicaKeepsAPluginScheduleForAnotherChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx := context.Background()
	want := []core.Schedule{{Key: "digest", Interval: time.Hour, Prompt: "digest", Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}}}
	for _, tc := range []struct {
		name string
		dsn  string
		kept bool
	}{
		{"sqlite", "", false},
		{"postgres", pgtest.DSN(t), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, onPostgres(testConfig(t.TempDir(), "http://127.0.0.1:9", ""), tc.dsn))
			a, err := BuildApp(ctx, cfg, AppOptions{Stdin: strings.NewReader(""), Stdout: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := a.sched.SyncPlugin(ctx, "news", want); err != nil {
				t.Fatal(err)
			}
			all, err := a.db.Schedules(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if kept := len(all) == 1 && all[0].Conversation.Channel == "slack"; kept != tc.kept {
				t.Fatalf("schedules stored: %+v; want the Slack one kept: %v", all, tc.kept)
			}
		})
	}
}
