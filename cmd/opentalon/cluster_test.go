package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestReplicasHandOverOnShutdown: two gateways on one PostgreSQL
// database. The first holds the scheduler and maintenance leases, the
// status page lists both replicas and who holds what; a graceful stop of
// the first hands both leases to the second in about a second, far less
// than cluster.lease_ttl (30s here), and records the first as stopped.
func TestReplicasHandOverOnShutdown(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dsn := pgtest.DSN(t)
	start := func(id string) *harness {
		extra := fmt.Sprintf("cluster:\n  replica_id: %s\n  lease_ttl: 30s\n  heartbeat: 200ms\n", id)
		cfg := parseConfig(t, insertUnder(testConfig(t.TempDir(), fake.URL, extra), "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn)))
		return startApp(t, cfg)
	}
	holds := func(h *harness, names ...string) bool {
		held := h.app.elector.HeldNames()
		for _, n := range names {
			if !slices.Contains(held, n) {
				return false
			}
		}
		return true
	}
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s", within, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a := start("replica-a")
	waitFor("replica-a holds the scheduler and maintenance leases", 20*time.Second, func() bool { return holds(a, "scheduler", maintenanceLease) })
	b := start("replica-b")
	waitFor("both replicas recorded", 20*time.Second, func() bool {
		c, err := b.app.statusCluster(context.Background())
		return err == nil && len(c.Replicas) == 2
	})
	c, err := b.app.statusCluster(context.Background())
	if err != nil || c.Replica != "replica-b" || len(c.Warnings) != 0 {
		t.Fatalf("cluster as replica-b sees it: %+v, %v", c, err)
	}
	for _, l := range c.Leases {
		if (l.Name == "scheduler" || l.Name == maintenanceLease) && (!l.Held || l.Holder != "replica-a") {
			t.Fatalf("lease %+v; want held by replica-a", l)
		}
	}
	if len(b.app.elector.HeldNames()) != 0 || !a.app.holdsMaintenance() || b.app.holdsMaintenance() {
		t.Fatalf("replica-b holds %v while replica-a runs", b.app.elector.HeldNames())
	}

	stopped := time.Now()
	a.shutdown()
	waitFor("replica-b takes over both leases", 10*time.Second, func() bool { return holds(b, "scheduler", maintenanceLease) })
	t.Logf("handover took %s (cluster.lease_ttl 30s)", time.Since(stopped).Round(time.Millisecond))
	c, err = b.app.statusCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas {
		if r.ID == "replica-a" && r.Stopped.IsZero() {
			t.Fatalf("replica-a not recorded as stopped: %+v", r)
		}
	}
}

// The replicas' config hash leaves out what is each replica's own (the
// status page's "different configs" warning would otherwise fire on
// replicas that must differ), and nothing else.
func TestConfigHashLeavesOutEachReplicasOwn(t *testing.T) {
	base := testConfig("/var/lib/opentalon", "http://127.0.0.1:1/v1", `channels:
  console: { enabled: false }
  telegram: { enabled: true, token: "1:x", mode: webhook, webhook: { listen: "127.0.0.1:8081", url: "https://bot.example/tg", secret: "s3cret" } }
  slack: { enabled: true, bot_token: "xoxb-1", signing_secret: "s", mode: events, events: { listen: "127.0.0.1:9091" } }
queue: { workers: 8 }
`)
	want := configHash(parseConfig(t, base))
	for _, tt := range []struct {
		name, from, to string
		same           bool
	}{
		{"another data directory", "/var/lib/opentalon", "/srv/r2", true},
		{"another webhook listener", "127.0.0.1:8081", "127.0.0.1:8082", true},
		{"another events listener", "127.0.0.1:9091", "127.0.0.1:9092", true},
		{"the console on", "console: { enabled: false }", "console: { enabled: true }", true},
		{"more workers", "workers: 8", "workers: 9", false},
		{"another webhook URL", "https://bot.example/tg", "https://bot.example/other", false},
	} {
		got := configHash(parseConfig(t, strings.Replace(base, tt.from, tt.to, 1)))
		if (got == want) != tt.same {
			t.Errorf("%s: hash %s vs %s; same = %v, want %v", tt.name, got, want, got == want, tt.same)
		}
	}
}
