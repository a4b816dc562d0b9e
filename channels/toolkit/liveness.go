package toolkit

import (
	"context"
	"sync"
	"time"
)

// Liveness notices a connection that has gone quiet: connected, yet
// nothing (no event, no ping, no heartbeat) arrived for a while. The
// platform calls Beat on every sign of life; Watch calls recycle once the
// connection was quiet for the whole period, so the platform closes it
// and connects again instead of staying deaf. Safe for concurrent use.
type Liveness struct {
	quiet time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last time.Time
}

// NewLiveness builds a watchdog that calls a connection dead after quiet
// (default 2 minutes) without a Beat. The period starts now.
func NewLiveness(quiet time.Duration, now func() time.Time) *Liveness {
	if quiet <= 0 {
		quiet = 2 * time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &Liveness{quiet: quiet, now: now, last: now()}
}

// Beat records a sign of life.
func (l *Liveness) Beat() {
	l.mu.Lock()
	l.last = l.now()
	l.mu.Unlock()
}

// Quiet is how long nothing has arrived.
func (l *Liveness) Quiet() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.now().Sub(l.last)
}

// Expired reports whether nothing arrived for the whole period. Reporting
// it starts a new period, so a fresh connection gets its full time.
func (l *Liveness) Expired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.last) < l.quiet {
		return false
	}
	l.last = now
	return true
}

// Watch checks four times per period and calls recycle each time the
// period expired, until ctx ends.
func (l *Liveness) Watch(ctx context.Context, recycle func()) {
	t := time.NewTicker(l.quiet / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if l.Expired() {
				recycle()
			}
		}
	}
}
