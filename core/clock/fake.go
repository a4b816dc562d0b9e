package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Fake is a clock whose time moves only when a test moves it. Safe for
// concurrent use. The zero value is not usable; call NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	pending waiters
	// changed is closed (and replaced) whenever a waiter is added, so
	// BlockUntil can wait for one without polling.
	changed chan struct{}
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the time forward by d, firing in deadline order (ties in
// the order they were set) every timer, ticker, AfterFunc and sleeper due
// by then; Now reads each one's deadline while it fires. AfterFunc
// callbacks run synchronously, one after the other, without the clock's
// lock held, so a callback may use the clock.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.advanceTo(target)
}

// Set moves the time to t (never backwards), firing what falls due.
func (f *Fake) Set(t time.Time) { f.advanceTo(t) }

func (f *Fake) advanceTo(target time.Time) {
	for {
		f.mu.Lock()
		if len(f.pending) == 0 || f.pending[0].when.After(target) {
			if target.After(f.now) {
				f.now = target
			}
			f.mu.Unlock()
			return
		}
		w := heap.Pop(&f.pending).(*waiter)
		if w.when.After(f.now) {
			f.now = w.when
		}
		now := f.now
		if w.period > 0 {
			w.when = w.when.Add(w.period)
			f.push(w)
		}
		if w.fn == nil {
			// A channel send that cannot block, or a sleeper's wake-up:
			// done under the lock, so a Stop or Reset that follows sees
			// the time it left (and drains it).
			w.fire(now)
			f.mu.Unlock()
			continue
		}
		f.mu.Unlock()
		w.fire(now)
	}
}

// Sleep blocks until the clock has been advanced by d, or ctx is done.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	w := &waiter{wake: make(chan struct{})}
	f.schedule(w, d)
	select {
	case <-w.wake:
		return nil
	case <-ctx.Done():
		f.remove(w)
		return ctx.Err()
	}
}

// AutoSleep is a Sleep that does not wait for the test: it moves the time
// to the sleeper's deadline (the time it was called plus d) unless the
// clock is already past it, firing what falls due. Concurrent sleepers of
// the same length started together therefore end at the same time, as
// they would on a real clock. Use it as a channel's or limiter's Sleep
// option when the test only measures the waits asked for.
func (f *Fake) AutoSleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		f.Set(f.Now().Add(d))
	}
	return ctx.Err()
}

// NewTimer returns a timer that fires when the clock passes now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &waiter{ch: make(chan time.Time, 1)}
	f.schedule(w, d)
	return &fakeTimer{f: f, w: w}
}

// AfterFunc calls fn (synchronously, from Advance) when the clock passes
// now+d, unless stopped first.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	w := &waiter{fn: fn}
	f.schedule(w, d)
	return &fakeTimer{f: f, w: w}
}

// NewTicker returns a ticker that fires every d of fake time. Like a real
// ticker it drops ticks a slow reader misses.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	w := &waiter{ch: make(chan time.Time, 1), period: d}
	f.schedule(w, d)
	return &fakeTicker{fakeTimer{f: f, w: w}}
}

// Waiters is how many timers, tickers and sleepers are waiting.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// BlockUntil returns once at least n timers, tickers or sleepers are
// waiting on the clock, or with ctx's error. A test calls it before
// Advance to know that the goroutine it drives has gone to sleep.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.pending) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) schedule(w *waiter, d time.Duration) {
	f.mu.Lock()
	w.when = f.now.Add(d)
	f.push(w)
	f.mu.Unlock()
	if d <= 0 {
		f.advanceTo(f.Now())
	}
}

// push adds w; f.mu is held.
func (f *Fake) push(w *waiter) {
	f.seq++
	w.seq = f.seq
	heap.Push(&f.pending, w)
	close(f.changed)
	f.changed = make(chan struct{})
}

// remove takes w off the clock; false when it was not waiting.
func (f *Fake) remove(w *waiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.index < 0 {
		return false
	}
	heap.Remove(&f.pending, w.index)
	return true
}

type waiter struct {
	when   time.Time
	seq    uint64
	index  int // in the heap; -1 when not waiting
	period time.Duration
	ch     chan time.Time
	fn     func()
	wake   chan struct{}
}

func (w *waiter) fire(now time.Time) {
	switch {
	case w.wake != nil:
		close(w.wake)
	case w.fn != nil:
		w.fn()
	default:
		select {
		case w.ch <- now:
		default: // a tick the reader has not taken yet: dropped, as time.Ticker does
		}
	}
}

// drain drops a time fired but not received.
func (w *waiter) drain() {
	if w.ch == nil {
		return
	}
	select {
	case <-w.ch:
	default:
	}
}

type fakeTimer struct {
	f *Fake
	w *waiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.ch }

// Stop and Reset drop a firing not yet received, as time.Timer's do
// since Go 1.23: no stale time is read after they return.
func (t *fakeTimer) Stop() bool {
	active := t.f.remove(t.w)
	t.w.drain()
	return active
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	active := t.f.remove(t.w)
	t.w.drain()
	t.f.schedule(t.w, d)
	return active
}

type fakeTicker struct{ fakeTimer }

func (t *fakeTicker) Stop() { t.f.remove(t.w); t.w.drain() }
func (t *fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	t.f.remove(t.w)
	t.w.drain()
	t.f.mu.Lock()
	t.w.period = d
	t.f.mu.Unlock()
	t.f.schedule(t.w, d)
}

// waiters is a min-heap by deadline, then by the order they were set.
type waiters []*waiter

func (h waiters) Len() int { return len(h) }
func (h waiters) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h waiters) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiters) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
