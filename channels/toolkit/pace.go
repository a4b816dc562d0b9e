package toolkit

import (
	"context"
	"sync"
	"time"
)

// Pacer spaces the sends of each conversation with a token bucket: a
// short burst goes out at once, then one send per gap (a longer gap in
// groups). Keys are the channel's conversation ids. Safe for concurrent
// use. The state lives in memory: after a restart every conversation
// starts with a full bucket again.
type Pacer struct {
	gap, groupGap time.Duration
	burst         int
	now           func() time.Time
	mu            sync.Mutex
	// next is when each conversation's bucket is full again, as a
	// "theoretical arrival time": a send is allowed at once while
	// next - now <= (burst-1)*gap.
	next map[string]time.Time
}

// PacerOptions configure a Pacer.
type PacerOptions struct {
	// Gap is the steady spacing in private conversations; GroupGap in
	// groups (default 3×Gap). A negative Gap turns pacing off.
	Gap, GroupGap time.Duration
	// Burst is how many sends go out at once before the spacing starts
	// (default 3).
	Burst int
	Now   func() time.Time
}

// NewPacer builds a Pacer.
func NewPacer(o PacerOptions) *Pacer {
	if o.GroupGap == 0 {
		o.GroupGap = 3 * o.Gap
	}
	if o.Burst <= 0 {
		o.Burst = 3
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Pacer{gap: o.Gap, groupGap: o.GroupGap, burst: o.Burst, now: o.Now, next: map[string]time.Time{}}
}

// maxPaced bounds the table; entries whose bucket is full again are
// dropped past it.
const maxPaced = 10000

// Reserve books one send in conversation key and returns how long to wait
// before it.
func (p *Pacer) Reserve(key string, group bool) time.Duration {
	if p == nil || p.gap < 0 {
		return 0
	}
	gap := p.gap
	if group {
		gap = p.groupGap
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	next := p.next[key]
	if next.Before(now) {
		next = now
	}
	wait := next.Sub(now) - time.Duration(p.burst-1)*gap
	p.next[key] = next.Add(gap)
	if len(p.next) > maxPaced {
		for k, t := range p.next {
			if t.Before(now) {
				delete(p.next, k)
			}
		}
	}
	return max(wait, 0)
}

// Limiter allows at most n sends in any window of length per, across all
// conversations of a channel: a send waits until the n-th send before it
// is a full window old. Safe for concurrent use.
type Limiter struct {
	per time.Duration
	now func() time.Time
	mu  sync.Mutex
	// ring holds the times of the last n bookings; i is the oldest.
	ring []time.Time
	i    int
}

// NewLimiter builds a Limiter; n <= 0 means no limit.
func NewLimiter(n int, per time.Duration, now func() time.Time) *Limiter {
	if n <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{per: per, now: now, ring: make([]time.Time, n)}
}

// Reserve books one send and returns how long to wait before it. Bookings
// are handed out in order, so waiting callers go out first come, first
// served.
func (l *Limiter) Reserve() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	at := now
	if oldest := l.ring[l.i]; !oldest.IsZero() && oldest.Add(l.per).After(at) {
		at = oldest.Add(l.per)
	}
	l.ring[l.i] = at
	l.i = (l.i + 1) % len(l.ring)
	return at.Sub(now)
}

// Pace combines a conversation's pacing and the channel's global limit.
// A nil Pacer or Limiter is no limit.
type Pace struct {
	Pacer   *Pacer
	Limiter *Limiter
	// Sleep waits (default Sleep); tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Wait blocks until one more send in conversation key is within both
// limits, or ctx ends.
func (p Pace) Wait(ctx context.Context, key string, group bool) error {
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	if err := sleep(ctx, p.Pacer.Reserve(key, group)); err != nil {
		return err
	}
	return sleep(ctx, p.Limiter.Reserve())
}

// Sleep waits d or until ctx ends; it returns ctx's error in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
