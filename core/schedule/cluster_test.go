package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/core/schedule"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// callLog records every EnqueueFiring call of every replica, duplicates
// included (the dedupe key is not what makes a firing happen once here).
type callLog struct {
	mu    sync.Mutex
	calls map[string]int
	at    []time.Time // when each call began
	n     chan struct{}
}

func (c *callLog) EnqueueFiring(_ context.Context, f core.Firing) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprintf("schedule:%d:%d", f.ScheduleID, f.At.UnixMilli())
	c.calls[key]++
	c.at = append(c.at, time.Now())
	select {
	case c.n <- struct{}{}:
	default:
	}
	return c.calls[key] > 1, nil
}

func (c *callLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at)
}

func (c *callLog) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for c.count() < n {
		select {
		case <-c.n:
		case <-deadline:
			t.Fatalf("%d firings after 30s; want %d", c.count(), n)
		}
	}
}

// replica is one gateway's scheduler over its own handle on the shared
// database.
type replica struct {
	db     *store.DB
	el     *lease.Elector
	s      *schedule.Scheduler
	cancel context.CancelFunc
	done   chan struct{}
}

// TestFiresOnceAcrossReplicas: three schedulers on three handles of one
// PostgreSQL database, an every-second schedule added on one that does
// not fire: each due time is queued exactly once (the leader fires, and a
// firing is a compare-and-set on the next firing time), the leader's
// death hands the firing to another, and a schedule deleted on a replica
// that does not fire is never fired again.
func TestFiresOnceAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds of real time")
	}
	dsn, dir := pgtest.DSN(t), t.TempDir()
	log := &callLog{calls: map[string]int{}, n: make(chan struct{}, 1)}
	const ttl = 2 * time.Second
	var reps []*replica
	for i := range 3 {
		db, err := store.Open(context.Background(), dir, store.Options{Postgres: &store.Postgres{DSN: dsn}, Holder: fmt.Sprint("replica-", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		el := lease.New(db, lease.Options{Holder: db.Holder(), TTL: ttl})
		s := schedule.New(schedule.Options{Store: db, Queue: log, Location: time.UTC, Tick: 100 * time.Millisecond, Grace: 2 * ttl,
			Hold: func(ctx context.Context, name string, work func(context.Context) error) error {
				return el.Hold(ctx, name, func(ctx context.Context, _ *lease.Lease) error { return work(ctx) })
			}})
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{db: db, el: el, s: s, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			if err := s.Run(ctx); err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		}()
		reps = append(reps, r)
	}
	t.Cleanup(func() {
		for _, r := range reps {
			r.cancel()
			<-r.done
		}
	})
	leader := func() int {
		for {
			for i, r := range reps {
				if len(r.el.Held()) > 0 {
					return i
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := leader()
	other := (first + 1) % 3
	sc, err := reps[other].s.Add(context.Background(), core.Schedule{Source: core.ScheduleChat, Interval: time.Second, Spec: "every 1s",
		Prompt: "tick", Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}})
	if err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, 4)

	// The leader dies gracefully (its lease released); another takes over.
	reps[first].cancel()
	<-reps[first].done
	before := log.count()
	log.waitFor(t, before+3)
	second := leader()
	if second == first {
		t.Fatal("the stopped replica still holds the lease")
	}

	// Deleted on a replica that does not fire: never fired again.
	var deleter int
	for i := range reps {
		if i != first && i != second {
			deleter = i
		}
	}
	if err := reps[deleter].s.Remove(context.Background(), sc.ID); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	time.Sleep(3 * time.Second)

	log.mu.Lock()
	defer log.mu.Unlock()
	for key, n := range log.calls {
		if n != 1 {
			t.Errorf("%s queued %d times; want once", key, n)
		}
	}
	for _, at := range log.at {
		if at.After(deleted) {
			t.Errorf("a firing queued %v after the schedule was deleted", at.Sub(deleted))
		}
	}
	if len(log.calls) < 7 {
		t.Errorf("%d firings; want at least 7", len(log.calls))
	}
}

// TestTakeoverFiresWhatFellDueWithinGrace: a replica starts after a
// firing time passed that the leader, now dead, never fired; it reads the
// schedules as a follower (the time looks missed), then takes the
// scheduler lease within Grace: it fires that time instead of skipping it.
func TestTakeoverFiresWhatFellDueWithinGrace(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sc, err := db.AddSchedule(context.Background(), core.Schedule{Source: core.ScheduleChat, Interval: time.Hour, Spec: "every 1h", Prompt: "hourly",
		Conversation: conv, NextFire: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(sc.NextFire.Add(5 * time.Second)) // due, and nobody fired it
	q := newQueue()
	lead := make(chan struct{})
	s := schedule.New(schedule.Options{Store: db, Queue: q, Location: time.UTC, Clock: clk, Tick: time.Second, Grace: 20 * time.Second,
		Hold: func(ctx context.Context, _ string, work func(context.Context) error) error {
			select {
			case <-lead:
				return work(ctx)
			case <-ctx.Done():
				return nil
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	clk.BlockUntil(ctx, 1) // the follower has read the schedules
	if len(s.Schedules()) != 1 {
		t.Fatalf("the follower holds %d schedules; want 1", len(s.Schedules()))
	}
	close(lead)
	f := q.wait(t)
	if f.ScheduleID != sc.ID || !f.At.Equal(sc.NextFire) {
		t.Fatalf("fired %+v; want schedule %d at %v", f, sc.ID, sc.NextFire)
	}
}

// cutQueue is a queue whose first firing finds the scheduler's lease
// ending as it is queued (a renewal that failed, a SIGTERM): it cancels
// cut and then, as a store call would, fails when its own context ended.
type cutQueue struct {
	*queue
	mu  sync.Mutex
	cut context.CancelFunc
}

func (c *cutQueue) EnqueueFiring(ctx context.Context, f core.Firing) (bool, error) {
	c.mu.Lock()
	cut := c.cut
	c.cut = nil
	c.mu.Unlock()
	if cut != nil {
		cut()
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return c.queue.EnqueueFiring(ctx, f)
}

// TestALeaseLostWhileFiringNeitherSkipsNorRepeats: the scheduler that
// claimed a due firing loses its lease while queueing it; the replica
// that leads next finds that due time queued once — not lost because
// the first one's context ended while it queued, nor queued a second
// time.
func TestALeaseLostWhileFiringNeitherSkipsNorRepeats(t *testing.T) {
	h := newHandover(t)
	clk, sc, dbA := h.clk, h.sc, h.dbA
	q := newQueue()
	cq := &cutQueue{queue: q}
	lostA := make(chan struct{})
	leadB := make(chan struct{})
	run := h.run
	// A leads until its lease is cut, then stands by for good.
	run(dbA, cq, func(ctx context.Context, work func(context.Context) error) error {
		lctx, cut := context.WithCancel(ctx)
		cq.mu.Lock()
		cq.cut = cut
		cq.mu.Unlock()
		work(lctx)
		close(lostA)
		<-ctx.Done()
		return nil
	})
	// B leads once A lost the lease.
	run(h.open(), q, func(ctx context.Context, work func(context.Context) error) error {
		select {
		case <-leadB:
			return work(ctx)
		case <-ctx.Done():
			return nil
		}
	})
	clk.Set(sc.NextFire.Add(time.Second)) // due
	// Set between A reading the time and setting its next timer, the
	// clock leaves that timer in the future for good: nudge it a
	// millisecond at a time until A has fired.
	for fired := false; !fired; {
		select {
		case <-lostA:
			fired = true
		case <-time.After(10 * time.Millisecond):
			clk.Advance(time.Millisecond)
		}
	}
	close(leadB)
	if f := q.wait(t); !f.At.Equal(sc.NextFire) {
		t.Fatalf("fired %+v; want the firing at %v", f, sc.NextFire)
	}
	// B, leading now, does not queue it again.
	for range 5 {
		clk.Advance(5 * time.Millisecond)
	}
	q.none(t, 100*time.Millisecond)
}

// frozenQueue is the queue of a process that dies while it queues a
// firing: its EnqueueFiring tells entered, then hangs until release,
// and nothing it was given is queued.
type frozenQueue struct {
	entered chan core.Firing
	release chan struct{}
}

func (f *frozenQueue) EnqueueFiring(ctx context.Context, fi core.Firing) (bool, error) {
	f.entered <- fi
	<-f.release
	return false, &core.Error{Kind: core.KindUnavailable, Msg: "the process died"}
}

// TestAKillWhileQueueingAFiringLosesNothing: the scheduler dies while it
// queues a due firing (kill -9 mid-write: the firing never reaches the
// queue); the scheduler that runs next still finds that time due and
// fires it.
func TestAKillWhileQueueingAFiringLosesNothing(t *testing.T) {
	h := newHandover(t)
	clk, sc, dbA := h.clk, h.sc, h.dbA
	// Each leads while it runs (the lease of a dead leader ran out).
	lead := func(ctx context.Context, work func(context.Context) error) error { return work(ctx) }
	run := func(db *store.DB, qu schedule.Queue) { h.run(db, qu, lead) }
	frozen := &frozenQueue{entered: make(chan core.Firing, 1), release: make(chan struct{})}
	run(dbA, frozen)
	t.Cleanup(func() { close(frozen.release) }) // runs first: the dead one's goroutine ends
	clk.Set(sc.NextFire.Add(time.Second))       // due
	select {
	case <-frozen.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first scheduler did not fire")
	}
	// The first one is dead mid-write; the next one runs.
	q := newQueue()
	run(h.open(), q)
	if f := q.wait(t); f.ScheduleID != sc.ID || !f.At.Equal(sc.NextFire) {
		t.Fatalf("fired %+v; want schedule %d at %v", f, sc.ID, sc.NextFire)
	}
}

// handover is two schedulers' handles on one SQLite database, on a fake
// clock, with an hourly schedule due at 9:00 added through dbA: the
// scheduler that fires first and the one that takes over.
type handover struct {
	t   *testing.T
	dir string
	clk *clock.Fake
	dbA *store.DB
	sc  core.Schedule
}

func newHandover(t *testing.T) *handover {
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	h := &handover{t: t, dir: t.TempDir(), clk: clock.NewFake(t0)}
	h.dbA = h.open()
	sc, err := h.dbA.AddSchedule(context.Background(), core.Schedule{Source: core.ScheduleChat, Interval: time.Hour, Spec: "every 1h", Prompt: "hourly",
		Conversation: conv, NextFire: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	h.sc = sc
	return h
}

// open is another handle on the database, closed when the test ends.
func (h *handover) open() *store.DB {
	db, err := store.Open(context.Background(), h.dir, store.Options{Now: h.clk.Now})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	return db
}

// run runs a scheduler on db and qu until the test ends; hold is its
// lease (the work it runs while it leads).
func (h *handover) run(db *store.DB, qu schedule.Queue, hold func(ctx context.Context, work func(context.Context) error) error) {
	s := schedule.New(schedule.Options{Store: db, Queue: qu, Location: time.UTC, Clock: h.clk, Tick: 5 * time.Millisecond, Grace: 20 * time.Second,
		Hold: func(ctx context.Context, _ string, work func(context.Context) error) error { return hold(ctx, work) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	h.t.Cleanup(func() { cancel(); <-done })
}
