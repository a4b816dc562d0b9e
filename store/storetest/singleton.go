package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testSingletonLeases checks the leases of singleton work
// (core.LeaseStore): taking, renewing, expiry and takeover with a new
// epoch, release, and data fenced by the epoch.
func testSingletonLeases(t *testing.T, e Engine) {
	const ttl = 10 * time.Second
	clock := NewClock()
	handle := e.New(t)
	a := handle(store.Options{Now: clock.Now, Holder: "replica-a"})
	b := handle(store.Options{Now: clock.Now, Holder: "replica-b"})
	var ls core.LeaseStore = a

	acquire := func(s core.LeaseStore, holder string, wantHeld bool, wantEpoch int64) {
		t.Helper()
		epoch, held, err := s.AcquireLease(ctx, "scheduler", holder, ttl)
		if err != nil || held != wantHeld || (held && epoch != wantEpoch) {
			t.Fatalf("%s acquires: epoch %d held %v, %v; want held %v in epoch %d", holder, epoch, held, err, wantHeld, wantEpoch)
		}
	}
	acquire(ls, "replica-a", true, 1)
	if d, err := b.LeaseData(ctx, "scheduler"); err != nil || d != nil {
		t.Fatalf("data of a new lease: %q, %v; want none", d, err)
	}
	acquire(b, "replica-b", false, 0)
	clock.Advance(ttl / 2)
	acquire(a, "replica-a", true, 1) // a renewal in time keeps the epoch
	clock.Advance(ttl / 2)
	acquire(b, "replica-b", false, 0) // renewed: still a's
	check(t, "a writes data", a.SetLeaseData(ctx, "scheduler", "replica-a", 1, []byte("offset=41\x00")))
	if err := b.SetLeaseData(ctx, "scheduler", "replica-b", 1, []byte("x")); !errors.Is(err, core.ErrLeaseNotHeld) {
		t.Fatalf("a non-holder writes data: %v; want ErrLeaseNotHeld", err)
	}
	if err := a.SetLeaseData(ctx, "scheduler", "replica-a", 1, make([]byte, core.MaxLeaseData+1)); err == nil {
		t.Fatal("data over the limit was written")
	}

	// a stops renewing: once the lease ran out b takes it in a new epoch,
	// and a's late writes change nothing.
	clock.Advance(ttl)
	acquire(b, "replica-b", true, 2)
	if err := a.SetLeaseData(ctx, "scheduler", "replica-a", 1, []byte("late")); !errors.Is(err, core.ErrLeaseNotHeld) {
		t.Fatalf("a late write of the last epoch: %v; want ErrLeaseNotHeld", err)
	}
	check(t, "a releasing the lease it lost", a.ReleaseLease(ctx, "scheduler", "replica-a", 1))
	acquire(a, "replica-a", false, 0)
	if d, err := b.LeaseData(ctx, "scheduler"); err != nil || !bytes.Equal(d, []byte("offset=41\x00")) {
		t.Fatalf("the successor reads %q, %v; want what the last holder left", d, err)
	}

	// A graceful release hands over at once, in a new epoch; the data
	// stays.
	check(t, "b releases", b.ReleaseLease(ctx, "scheduler", "replica-b", 2))
	acquire(a, "replica-a", true, 3)
	if d, _ := a.LeaseData(ctx, "scheduler"); string(d) != "offset=41\x00" {
		t.Fatalf("data after a release: %q", d)
	}
	// A holder that let its lease run out and comes back starts a new
	// term: what it did under the old epoch is fenced.
	clock.Advance(ttl)
	acquire(a, "replica-a", true, 4)
	if err := a.SetLeaseData(ctx, "scheduler", "replica-a", 3, []byte("old term")); !errors.Is(err, core.ErrLeaseNotHeld) {
		t.Fatalf("a write of the term before: %v; want ErrLeaseNotHeld", err)
	}

	list, err := b.Leases(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "scheduler" || list[0].Holder != "replica-a" || list[0].Epoch != 4 ||
		!list[0].Expires.Equal(clock.Now().Add(ttl)) || !list[0].Held(clock.Now()) {
		t.Fatalf("leases: %+v, %v", list, err)
	}
	if _, _, err := a.AcquireLease(ctx, "", "replica-a", ttl); err == nil {
		t.Fatal("a lease without a name was taken")
	}
}

// leaseRace: replicas race for one lease the moment it runs out, many
// rounds over: exactly one takes it each round, and the epochs of the
// winners only grow.
func leaseRace(t *testing.T, e Engine) {
	const ttl = time.Second
	const handles, racers, rounds = 4, 4, 40
	clock := NewClock()
	handle := e.New(t)
	dbs := make([]*store.DB, handles)
	for i := range dbs {
		dbs[i] = handle(store.Options{Now: clock.Now, Holder: fmt.Sprint("replica-", i)})
	}
	last := int64(0)
	for round := range rounds {
		clock.Advance(ttl + time.Millisecond)
		var mu sync.Mutex
		var winners []string
		var epochs []int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for h := range handles {
			for r := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					holder := fmt.Sprintf("replica-%d/%d", h, r)
					epoch, held, err := dbs[h].AcquireLease(ctx, "race", holder, ttl)
					if err != nil {
						t.Errorf("round %d: %s: %v", round, holder, err)
						return
					}
					if held {
						mu.Lock()
						winners = append(winners, holder)
						epochs = append(epochs, epoch)
						mu.Unlock()
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: holders %v; want exactly one", round, winners)
		}
		if epochs[0] <= last {
			t.Fatalf("round %d: epoch %d after %d; want it to grow", round, epochs[0], last)
		}
		last = epochs[0]
	}
}

// testCluster checks the replica registry and the notices claimed once
// for the cluster.
func testCluster(t *testing.T, e Engine) {
	clock := NewClock()
	handle := e.New(t)
	a := handle(store.Options{Now: clock.Now, Holder: "a"})
	b := handle(store.Options{Now: clock.Now, Holder: "b"})
	start := clock.Now()
	check(t, "register a", a.RegisterReplica(ctx, core.Replica{ID: "a", Host: "h1", Version: "1.2.0", ConfigHash: "c1", Started: start, Heartbeat: start}))
	check(t, "register b", b.RegisterReplica(ctx, core.Replica{ID: "b", Host: "h2", Version: "1.3.0", ConfigHash: "c1", Started: start, Heartbeat: start}))
	clock.Advance(time.Minute)
	check(t, "heartbeat", a.ReplicaHeartbeat(ctx, "a", clock.Now()))
	rs, err := b.Replicas(ctx, start)
	if err != nil || len(rs) != 1 || rs[0].ID != "a" || rs[0].Version != "1.2.0" || !rs[0].Heartbeat.Equal(clock.Now()) || !rs[0].Started.Equal(start) {
		t.Fatalf("replicas heard from since the start: %+v, %v; want a only", rs, err)
	}
	check(t, "b stops", b.ReplicaStopped(ctx, "b", clock.Now()))
	if rs, _ := a.Replicas(ctx, time.Time{}); len(rs) != 2 || rs[1].Stopped.IsZero() || !rs[0].Stopped.IsZero() {
		t.Fatalf("after b stopped: %+v", rs)
	}

	for i, want := range []bool{true, false} {
		db := []*store.DB{a, b}[i]
		if got, err := db.ClaimNotice(ctx, "budget_warning|2026-11-26|routing.budget.daily_usd|80", time.Hour); err != nil || got != want {
			t.Fatalf("claim %d: %v, %v; want %v", i, got, err, want)
		}
	}
	clock.Advance(time.Hour)
	if got, err := b.ClaimNotice(ctx, "budget_warning|2026-11-26|routing.budget.daily_usd|80", time.Hour); err != nil || !got {
		t.Fatalf("a claim after the first ended: %v, %v; want claimed", got, err)
	}
	clock.Advance(2 * time.Hour)
	check(t, "prune", a.PruneCluster(ctx, clock.Now().Add(-time.Hour)))
	if rs, _ := a.Replicas(ctx, time.Time{}); len(rs) != 0 {
		t.Fatalf("replicas silent for hours kept: %+v", rs)
	}
}

// syncRace: five replicas start at once and sync the same source's
// schedules (the config's, a plugin's): they end with one row per key,
// not one per replica.
func syncRace(t *testing.T, e Engine) {
	handle := e.New(t)
	const replicas = 5
	dbs := make([]*store.DB, replicas)
	for i := range dbs {
		dbs[i] = handle(store.Options{Holder: fmt.Sprint("replica-", i)})
	}
	c := core.ConversationKey{Channel: "telegram", Chat: "1"}
	want := []core.Schedule{
		{Key: "a", Interval: time.Hour, Prompt: "a", Conversation: c},
		{Key: "b", Cron: "0 9 * * *", Prompt: "b", Conversation: c},
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := db.SyncSchedules(ctx, "plugin:weather", append([]core.Schedule(nil), want...)); err != nil {
				t.Errorf("sync: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	all, err := dbs[0].Schedules(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("after five replicas synced: %d schedules, %v; want 2", len(all), err)
	}
}

// pairingRace: one user's first message reaches several replicas at once
// (a platform's retry on another replica): each asks for a pairing with
// its own code, and every one of them is told the same code, the one
// stored.
func pairingRace(t *testing.T, e Engine) {
	handle := e.New(t)
	const replicas = 4
	dbs := make([]*store.DB, replicas)
	for i := range dbs {
		dbs[i] = handle(store.Options{Holder: fmt.Sprint("replica-", i)})
	}
	for round := range 20 {
		codes := make([]string, replicas)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, db := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p, err := db.RequestPairing(ctx, core.Pairing{Channel: "telegram", UserID: fmt.Sprint("u", round), Conversation: conv(fmt.Sprint("u", round)),
					Code: fmt.Sprintf("R%02dC%d", round, i)})
				if err != nil {
					t.Errorf("round %d replica %d: %v", round, i, err)
					return
				}
				codes[i] = p.Code
			}()
		}
		close(start)
		wg.Wait()
		for i := range codes {
			if codes[i] != codes[0] {
				t.Fatalf("round %d: the replicas told the user codes %v; want one", round, codes)
			}
		}
	}
}
