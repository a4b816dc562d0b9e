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
