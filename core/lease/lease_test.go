package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/lease"
)

// memLeases is a core.LeaseStore in memory with the store's semantics,
// whose calls can be made to fail or hang.
type memLeases struct {
	clk   clock.Clock
	mu    sync.Mutex
	rows  map[string]*memRow
	calls int
	fail  error
	hang  chan struct{} // while set, AcquireLease waits for it or ctx
}

type memRow struct {
	holder  string
	epoch   int64
	expires time.Time
	data    []byte
}

func newMem(clk clock.Clock) *memLeases { return &memLeases{clk: clk, rows: map[string]*memRow{}} }

func (m *memLeases) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	m.mu.Lock()
	m.calls++
	hang, fail := m.hang, m.fail
	m.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
	if fail != nil {
		return 0, false, fail
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	r := m.rows[name]
	if r == nil {
		r = &memRow{}
		m.rows[name] = r
	}
	live := r.expires.After(now)
	if r.holder != holder && live {
		return 0, false, nil
	}
	if r.holder != holder || !live {
		r.epoch++
	}
	r.holder, r.expires = holder, now.Add(ttl)
	return r.epoch, true, nil
}

func (m *memLeases) ReleaseLease(ctx context.Context, name, holder string, epoch int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rows[name]; r != nil && r.holder == holder && r.epoch == epoch {
		r.holder, r.expires = "", time.Time{}
	}
	return nil
}

func (m *memLeases) LeaseData(ctx context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rows[name]; r != nil {
		return r.data, nil
	}
	return nil, nil
}

func (m *memLeases) SetLeaseData(ctx context.Context, name, holder string, epoch int64, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[name]
	if r == nil || r.holder != holder || r.epoch != epoch || !r.expires.After(m.clk.Now()) {
		return core.ErrLeaseNotHeld
	}
	r.data = data
	return nil
}

func (m *memLeases) Leases(ctx context.Context) ([]core.LeaseInfo, error) { return nil, nil }

func (m *memLeases) set(fail error, hang chan struct{}) {
	m.mu.Lock()
	m.fail, m.hang = fail, hang
	m.mu.Unlock()
}

func (m *memLeases) row(name string) memRow {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rows[name]; r != nil {
		return *r
	}
	return memRow{}
}

const ttl = 9 * time.Second

// term records one run of the work.
type term struct {
	epoch int64
	ctx   context.Context
	l     *lease.Lease
}

// holdIn runs Hold in the background and reports each term's start.
func holdIn(t *testing.T, ctx context.Context, el *lease.Elector, name string) (<-chan term, <-chan error) {
	terms := make(chan term, 8)
	done := make(chan error, 1)
	go func() {
		done <- el.Hold(ctx, name, func(ctx context.Context, l *lease.Lease) error {
			terms <- term{l.Epoch(), ctx, l}
			<-ctx.Done()
			return context.Cause(ctx)
		})
	}()
	return terms, done
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestHandoverOnShutdown(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_780_000_000, 0))
	mem := newMem(clk)
	renewed := make(chan string, 16)
	a := lease.New(mem, lease.Options{Holder: "a", TTL: ttl, Clock: clk, OnRenewed: func(n string, _ int64) { renewed <- n }})
	b := lease.New(mem, lease.Options{Holder: "b", TTL: ttl, Clock: clk})
	actx, stopA := context.WithCancel(context.Background())
	aTerms, aDone := holdIn(t, actx, a, "scheduler")
	at := recv(t, aTerms, "a's term")
	if at.epoch != 1 || a.Held()["scheduler"] != 1 {
		t.Fatalf("a holds epoch %d (held %v); want 1", at.epoch, a.Held())
	}
	check(t, at.l.SetData(context.Background(), []byte("offset 7")))
	bctx, stopB := context.WithCancel(context.Background())
	defer stopB()
	bTerms, _ := holdIn(t, bctx, b, "scheduler")
	// a renews through several TTLs; b never gets it.
	for range 9 {
		clk.BlockUntil(context.Background(), 3) // a's ticker and fence, b's sleep
		clk.Advance(ttl / 3)
		recv(t, renewed, "a's renewal")
	}
	select {
	case bt := <-bTerms:
		t.Fatalf("b took the lease (epoch %d) while a renewed it", bt.epoch)
	default:
	}
	stopA()
	if err := recv(t, aDone, "a's Hold to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a's Hold returned %v", err)
	}
	if r := mem.row("scheduler"); r.holder == "a" {
		t.Fatal("after a's shutdown the lease is still a's; want it released")
	}
	var bt term
	select {
	case bt = <-bTerms:
	default:
		clk.BlockUntil(context.Background(), 1)
		clk.Advance(time.Second) // one poll, far less than the TTL
		bt = recv(t, bTerms, "b's term")
	}
	if bt.epoch != 2 {
		t.Fatalf("b took epoch %d; want 2", bt.epoch)
	}
	if d, _ := bt.l.Data(context.Background()); string(d) != "offset 7" {
		t.Fatalf("b reads %q; want a's data", d)
	}
	if err := at.l.SetData(context.Background(), []byte("late")); !errors.Is(err, core.ErrLeaseNotHeld) {
		t.Fatalf("a's late write: %v; want ErrLeaseNotHeld", err)
	}
}

func TestRenewalFailureStopsTheWork(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_780_000_000, 0))
	mem := newMem(clk)
	el := lease.New(mem, lease.Options{Holder: "a", TTL: ttl, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terms, _ := holdIn(t, ctx, el, "maintenance")
	first := recv(t, terms, "the first term")
	mem.set(errors.New("connection refused"), nil)
	clk.BlockUntil(ctx, 2)
	clk.Advance(ttl / 3)
	<-first.ctx.Done()
	if !lease.Lost(context.Cause(first.ctx)) {
		t.Fatalf("the work's context ended with %v; want a lost lease", context.Cause(first.ctx))
	}
	// The store comes back: the replica campaigns again and, as nobody
	// took the lease, renews it in the same term.
	mem.set(nil, nil)
	for len(el.Held()) > 0 { // the term's timers stopped
		time.Sleep(time.Millisecond)
	}
	clk.BlockUntil(ctx, 1) // Hold waits a poll before campaigning again
	clk.Advance(time.Second)
	if second := recv(t, terms, "the second term"); second.epoch != first.epoch {
		t.Fatalf("second term %d; want %d (nobody else took it)", second.epoch, first.epoch)
	}
}

func TestFenceStopsTheWorkBeforeExpiry(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_780_000_000, 0))
	mem := newMem(clk)
	el := lease.New(mem, lease.Options{Holder: "a", TTL: ttl, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terms, _ := holdIn(t, ctx, el, "poller")
	first := recv(t, terms, "the first term")
	expires := mem.row("poller").expires
	hang := make(chan struct{})
	defer close(hang)
	mem.set(nil, hang) // renewals hang (a database that stopped answering)
	clk.BlockUntil(ctx, 2)
	clk.Advance(ttl / 3) // a renewal starts and hangs
	// Up to the fence (a sixth of the TTL before the expiry), not past it:
	// the work must stop while the fake time stands there.
	clk.BlockUntil(ctx, 2)
	clk.Set(expires.Add(-ttl / 6))
	recv(t, first.ctx.Done(), "the work to stop")
	if !lease.Lost(context.Cause(first.ctx)) || !clk.Now().Before(expires) {
		t.Fatalf("stopped at %v with %v; want stopped before %v as a lost lease", clk.Now(), context.Cause(first.ctx), expires)
	}
}

func TestSoleNeverRenews(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_780_000_000, 0))
	mem := newMem(clk)
	el := lease.New(mem, lease.Options{Holder: "only", TTL: ttl, Clock: clk, Sole: true})
	ctx, cancel := context.WithCancel(context.Background())
	terms, done := holdIn(t, ctx, el, "scheduler")
	tm := recv(t, terms, "the term")
	clk.Advance(10 * ttl)
	if tm.ctx.Err() != nil {
		t.Fatal("the sole holder's work stopped")
	}
	mem.mu.Lock()
	calls := mem.calls
	mem.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d store calls; want the one that took the lease", calls)
	}
	cancel()
	recv(t, done, "Hold to return")
	if r := mem.row("scheduler"); r.holder != "" {
		t.Fatalf("not released at shutdown: %q", r.holder)
	}
}

func TestWorkThatFinishesReleases(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_780_000_000, 0))
	mem := newMem(clk)
	el := lease.New(mem, lease.Options{Holder: "a", TTL: ttl, Clock: clk})
	err := el.Hold(context.Background(), "once", func(ctx context.Context, l *lease.Lease) error { return nil })
	if err != nil || mem.row("once").holder != "" || len(el.Held()) != 0 {
		t.Fatalf("Hold: %v, holder %q, held %v; want nil, released", err, mem.row("once").holder, el.Held())
	}
	if err := lease.New(mem, lease.Options{}).Hold(context.Background(), "x", nil); err == nil {
		t.Fatal("an elector without a holder name held a lease")
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnreachableStoreIsLoggedSparingly: a store that is down fails every
// poll of a campaign; the log gets its first failure, one line a minute
// after it, and the recovery, not a line a second.
func TestUnreachableStoreIsLoggedSparingly(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_780_000_000, 0))
	mem := newMem(clk)
	mem.set(errors.New("connection refused"), nil)
	var logs lockedLines
	el := lease.New(mem, lease.Options{Holder: "a", TTL: ttl, Poll: time.Second, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terms, _ := holdIn(t, ctx, el, "scheduler")
	poll := func() {
		t.Helper()
		wctx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		if err := clk.BlockUntil(wctx, 1); err != nil {
			t.Fatal("the campaign no longer waits between polls")
		}
		clk.Advance(time.Second)
	}
	for range 90 { // a minute and a half of polls
		poll()
	}
	mem.set(nil, nil)
	poll()
	recv(t, terms, "the term once the store answers")
	got := logs.String()
	if n := strings.Count(got, "cannot reach the store"); n != 2 {
		t.Fatalf("%d warnings over 90 failed polls; want 2 (the first, a minute later):\n%s", n, got)
	}
	if !strings.Contains(got, "failures_not_logged=59") || !strings.Contains(got, "the store answers again") {
		t.Fatalf("want the count of the failures not logged and the recovery:\n%s", got)
	}
}

// lockedLines is a goroutine-safe log buffer.
type lockedLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
