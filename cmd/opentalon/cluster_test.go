package main

import (
	"context"
	"fmt"
	"slices"
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
