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
// trip it, while a table or string bomb does within one tick of crossing
// it. The heap is the process's, so a run that starts while another one
// bombs may be stopped with it.
type watchdog struct {
	budget uint64
	every  time.Duration

	mu      sync.Mutex
	samples []metrics.Sample
	watches map[*watch]struct{}
	running bool
	// heap and goal are the last reading, taken at read.
	heap, goal uint64
	read       time.Time
}

// watch is one run under the watchdog; its fields are guarded by the
// watchdog's mutex.
type watch struct {
	limit uint64
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
		samples: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/goal:bytes"}},
		watches: map[*watch]struct{}{},
	}
}

// readHeap reads the bytes of heap objects (live and not yet swept) and
// the heap goal of the next collection; d.mu is held. A reading younger
// than one tick is reused while the loop runs.
func (d *watchdog) readHeap(now time.Time) {
	if d.running && now.Sub(d.read) < d.every {
		return
	}
	metrics.Read(d.samples)
	if v := d.samples[0].Value; v.Kind() == metrics.KindUint64 {
		d.heap = v.Uint64()
	}
	if v := d.samples[1].Value; v.Kind() == metrics.KindUint64 {
		d.goal = v.Uint64()
	}
	d.read = now
}

// setLimit sets w's heap limit from the current heap; d.mu is held.
func (d *watchdog) setLimit(w *watch, now time.Time) {
	d.readHeap(now)
	slack := uint64(0)
	if d.goal > d.heap {
		slack = min(d.goal-d.heap, d.budget)
	}
	w.limit = d.heap + slack + d.budget
}

// add watches a run that may execute for timeout.
func (d *watchdog) add(timeout time.Duration, stop context.CancelCauseFunc) *watch {
	now := time.Now()
	w := &watch{left: timeout, since: now, stop: stop}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setLimit(w, now)
	d.watches[w] = struct{}{}
	if !d.running {
		d.running = true
		go d.loop()
	}
	return w
}

// pause stops w's clock and memory watch (the run waits for ctx.llm).
func (d *watchdog) pause(w *watch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !w.since.IsZero() {
		w.left -= time.Since(w.since)
		w.since = time.Time{}
	}
}

// resume restarts w's clock, and its memory watch from the current heap.
func (d *watchdog) resume(w *watch) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	w.since = now
	d.setLimit(w, now)
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
		d.running = false // force a fresh reading
		d.readHeap(now)
		d.running = true
		for w := range d.watches {
			if w.since.IsZero() {
				continue // paused
			}
			switch {
			case now.Sub(w.since) >= w.left:
				delete(d.watches, w)
				w.stop(ErrTimeout)
			case d.heap > w.limit:
				delete(d.watches, w)
				w.stop(ErrMemory)
			}
		}
		d.mu.Unlock()
	}
}
