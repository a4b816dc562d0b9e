package main

import (
	"context"
	"sync"
	"time"
)

// runEvery calls fn every interval (first at once when now is set) on a
// goroutine of its own, until the returned stop is called; stop waits for
// a call in progress. The gateway's housekeeping (session expiry, the
// media sweep, the queue pruner) runs on it.
func runEvery(ctx context.Context, interval time.Duration, now bool, fn func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		if now {
			fn(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// startSettle is how long after the channels start the work no first
// message needs begins: the providers' check, the scheduler, the first
// housekeeping. Before it, on a small machine, that work would take the
// CPU from the channels' first requests (with GOMAXPROCS 1 a goroutine
// runs until it blocks).
const startSettle = time.Second

// afterStart waits startSettle; false when ctx ended first.
func afterStart(ctx context.Context) bool {
	t := time.NewTimer(startSettle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
