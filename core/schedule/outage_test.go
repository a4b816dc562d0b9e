package schedule_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/schedule"
	"github.com/opentalon/opentalon/store"
)

// downStore is a database that is out of reach for SchedulesVersion
// while down is set; each call is signalled on calls.
type downStore struct {
	*store.DB
	mu    sync.Mutex
	down  bool
	watch bool // signal each call
	calls chan struct{}
}

func (d *downStore) SchedulesVersion(ctx context.Context) (int64, error) {
	d.mu.Lock()
	down, watch := d.down, d.watch
	d.mu.Unlock()
	if watch {
		defer func() { d.calls <- struct{}{} }()
	}
	if down {
		return 0, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return d.DB.SchedulesVersion(ctx)
}

// syncBuffer is a log sink the scheduler's goroutine writes while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestADatabaseOutageIsLoggedOnceAMinute: a replica that does not fire
// reads the schedules' version every tick; while the database is down
// (PostgreSQL restarting) that fails every second, and the log says so
// once, then once a minute with the count, and once when it reads again —
// not a line a second.
func TestADatabaseOutageIsLoggedOnceAMinute(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ds := &downStore{DB: db, calls: make(chan struct{})}
	var logs syncBuffer
	s := schedule.New(schedule.Options{Store: ds, Queue: newQueue(), Location: time.UTC, Clock: clk, Tick: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Hold: func(ctx context.Context, _ string, _ func(context.Context) error) error {
			<-ctx.Done() // another replica fires
			return nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	clk.BlockUntil(ctx, 1) // read the schedules while the database was up
	ds.mu.Lock()
	ds.down, ds.watch = true, true
	ds.mu.Unlock()
	const ticks = 30
	for range ticks {
		clk.BlockUntil(ctx, 1)
		clk.Advance(time.Second)
		<-ds.calls
	}
	ds.mu.Lock()
	ds.down = false
	ds.mu.Unlock()
	// The next read succeeds; the one after it begins once the first's
	// refresh (and its log) is over.
	for range 2 {
		clk.BlockUntil(ctx, 1)
		clk.Advance(time.Second)
		<-ds.calls
	}
	cancel()
	<-done
	out := logs.String()
	if n := strings.Count(out, "read the schedules' version"); n != 1 {
		t.Errorf("%d log lines for %d failed reads within a minute; want 1:\n%s", n, ticks, out)
	}
	if !strings.Contains(out, "reads again") {
		t.Errorf("the recovery is not logged:\n%s", out)
	}
}
