package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestSlackSlotsOnePerReplica: three replicas on one PostgreSQL take the
// app's Socket Mode slots (two here): each replica at most one, never
// more connections than slots; when a holder stops, the replica standing
// by takes the freed slot.
func TestSlackSlotsOnePerReplica(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := config.Default()
	cfg.State.Driver = config.DriverPostgres
	var mu sync.Mutex
	active := map[int]bool{}
	most := 0
	stops := make([]context.CancelFunc, 3)
	done := make([]chan struct{}, 3)
	for i := range stops {
		db, err := store.Open(context.Background(), t.TempDir(), store.Options{Postgres: &store.Postgres{DSN: dsn}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		a := &App{cfg: cfg, db: db, log: slog.New(slog.DiscardHandler)}
		a.buildElector()
		ctx, cancel := context.WithCancel(context.Background())
		stops[i], done[i] = cancel, make(chan struct{})
		go func() {
			defer close(done[i])
			_ = a.slackHoldSlot()(ctx, "slack:B1:socket:", 2, func(ctx context.Context) error {
				mu.Lock()
				active[i] = true
				most = max(most, len(active))
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				delete(active, i)
				mu.Unlock()
				return nil
			})
		}()
	}
	t.Cleanup(func() {
		for i, stop := range stops {
			stop()
			<-done[i]
		}
	})
	waitActive := func(want int, what string) []int {
		deadline := time.Now().Add(15 * time.Second)
		for {
			mu.Lock()
			var on []int
			for i := range active {
				on = append(on, i)
			}
			mu.Unlock()
			if len(on) == want {
				return on
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d connections active, want %d", what, len(on), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	on := waitActive(2, "at start")
	time.Sleep(1500 * time.Millisecond) // the third replica looks again every second
	if n := len(waitActive(2, "with every slot taken")); n != 2 {
		t.Fatal("unreachable")
	}
	stops[on[0]]() // a rolling deploy stops one holder: its slot is released
	<-done[on[0]]
	after := waitActive(2, "after a holder stopped")
	for _, i := range after {
		if i == on[0] {
			t.Fatalf("the stopped replica %d still counts as connected", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Fatalf("%d connections at once; the app has 2 slots", most)
	}
}
