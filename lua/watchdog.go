package lua

import (
	"context"
	"runtime/metrics"
	"sync"
	"time"
)

// watchdog enforces both limits of the runs in progress with one ticker:
// the execution time (time paused while a run waits for ctx.llm not
// counted) and the memory budget, which gopher-lua cannot enforce. While
// any run is watched it polls the clock and the process heap every tick,
// and stops a run whose time is up or during which the heap grew past
// its limit.
//
// A run's heap limit is the heap at its start, plus what the garbage
// collector would let the heap grow to anyway (at most one budget more),
// plus the budget: ordinary garbage from the rest of the gateway does not
// trip it, while a table or string bomb does. The ticker is the backstop:
// a run also checks its limit itself, every few instructions and before
// the sandbox builds a string (memory.go), so the limit holds however
// late the ticker runs. The heap is the process's, so a run that starts
// while another one bombs may be stopped with it.
type watchdog struct {
	budget uint64
	every  time.Duration

	mu      sync.Mutex
	samples []metrics.Sample
	watches map[*watch]struct{}
	running bool
}

// watch is one run under the watchdog; its fields are guarded by the
// watchdog's mutex, but limit, which only the run's goroutine changes,
// may be read by it without.
type watch struct {
	limit uint64
	// paused is the heap when the run began to wait for ctx.llm.
	paused uint64
	// samples is the run's own reading of the heap (over).
	samples []metrics.Sample
	// left is the execution time left when the current stretch began at
	// since (zero while paused).
	left  time.Duration
	since time.Time
	// stop ends the run with ErrTimeout or ErrMemory, at most once.
	stop context.CancelCauseFunc
}

func newWatchdog(budget uint64, every time.Duration) *watchdog {
	return &watchdog{
		budget:  budget,
		every:   every,
		samples: []metrics.Sample{{Name: heapObjects}},
		watches: map[*watch]struct{}{},
	}
}

// heapObjects is the metric of the heap a run's limit is set against:
// the bytes of heap objects, live and not yet swept.
const heapObjects = "/memory/classes/heap/objects:bytes"

// heapNow reads the heap for w, at once (the run's goroutine only).
func (w *watch) heapNow() uint64 {
	metrics.Read(w.samples)
	if v := w.samples[0].Value; v.Kind() == metrics.KindUint64 {
		return v.Uint64()
	}
	return 0
}

// over reports whether the heap, with extra bytes more, is past w's
// limit; the run's goroutine calls it.
func (d *watchdog) over(w *watch, extra uint64) bool {
	return w.heapNow()+extra > w.limit
}

// setLimit sets w's heap limit from the heap now (never the ticker's
// last reading: taken while another run grew the heap, it would raise the
// limit by that run's growth).
func (d *watchdog) setLimit(w *watch) {
	s := []metrics.Sample{{Name: heapObjects}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	var heap, goal uint64
	if v := s[0].Value; v.Kind() == metrics.KindUint64 {
		heap = v.Uint64()
	}
	if v := s[1].Value; v.Kind() == metrics.KindUint64 {
		goal = v.Uint64()
	}
	slack := uint64(0)
	if goal > heap {
		slack = min(goal-heap, d.budget)
	}
	w.limit = heap + slack + d.budget
}

// add watches a run that may execute for timeout.
func (d *watchdog) add(timeout time.Duration, stop context.CancelCauseFunc) *watch {
	now := time.Now()
	w := &watch{left: timeout, since: now, stop: stop, samples: []metrics.Sample{{Name: heapObjects}}}
	d.setLimit(w)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.watches[w] = struct{}{}
	if !d.running {
		d.running = true
		go d.loop()
	}
	return w
}

// pause stops w's clock and memory watch (the run waits for ctx.llm).
func (d *watchdog) pause(w *watch) {
	heap := w.heapNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !w.since.IsZero() {
		w.left -= time.Since(w.since)
		w.since = time.Time{}
	}
	w.paused = heap
}

// resume restarts w's clock and its memory watch. What the heap grew by
// meanwhile is others' (the run was waiting): the limit moves up by it,
// and what the run had used before stays used.
func (d *watchdog) resume(w *watch) {
	heap := w.heapNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	w.since = time.Now()
	if heap > w.paused {
		w.limit += heap - w.paused
	}
}

// remove ends a watch (a no-op when it already fired).
func (d *watchdog) remove(w *watch) {
	d.mu.Lock()
	delete(d.watches, w)
	d.mu.Unlock()
}

// loop ticks while anything is watched.
func (d *watchdog) loop() {
	t := time.NewTicker(d.every)
	defer t.Stop()
	for now := range t.C {
		d.mu.Lock()
		if len(d.watches) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		metrics.Read(d.samples)
		heap := d.samples[0].Value.Uint64()
		for w := range d.watches {
			if w.since.IsZero() {
				continue // paused
			}
			switch {
			case now.Sub(w.since) >= w.left:
				delete(d.watches, w)
				w.stop(ErrTimeout)
			case heap > w.limit:
				delete(d.watches, w)
				w.stop(ErrMemory)
			}
		}
		d.mu.Unlock()
	}
}
