package toolkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Pacer spaces the sends of each conversation with a token bucket: a
// short burst goes out at once, then one send per gap (a longer gap in
// groups). Keys are the channel's conversation ids. Safe for concurrent
// use. The state lives in memory: after a restart every conversation
// starts with a full bucket again.
//
// Senders wait their turn in a line per conversation (see Pace.Wait):
// only a send that is made spends the bucket, so a sender that gives up
// (its context ended) leaves its turn to the next one.
type Pacer struct {
	gap, groupGap time.Duration
	burst         int
	now           func() time.Time
	mu            sync.Mutex
	convs         map[string]*paced
}

// paced is one conversation's bucket and line.
type paced struct {
	// next is when the bucket is full again, as a "theoretical arrival
	// time": a send is allowed at once while next - now <= (burst-1)*gap.
	next time.Time
	line line
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
	return &Pacer{gap: o.Gap, groupGap: o.GroupGap, burst: o.Burst, now: o.Now, convs: map[string]*paced{}}
}

// maxPaced bounds the table; idle entries whose bucket is full again
// are dropped past it.
const maxPaced = 10000

// hold waits until w is first in conversation key's line and the bucket
// allows a send, and keeps that place (nobody of the conversation passes
// it) until release. On an error (ctx ended) w has left the line.
func (p *Pacer) hold(ctx context.Context, key string, gap time.Duration, w *waiter, sleep sleepFunc) (*paced, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.convs[key]
	if c == nil {
		if len(p.convs) >= maxPaced {
			now := p.now()
			for k, o := range p.convs {
				if len(o.line) == 0 && o.next.Before(now) {
					delete(p.convs, k)
				}
			}
		}
		c = &paced{}
		p.convs[key] = c
	}
	slack := time.Duration(p.burst-1) * gap
	err := await(ctx, &p.mu, &c.line, w, sleep, func() time.Duration {
		now := p.now()
		if !c.next.After(now) {
			return 0
		}
		return c.next.Sub(now) - slack
	})
	if err != nil {
		return nil, err
	}
	w.held = true
	return c, nil
}

// release ends w's hold on c's line; sent spends one send of the bucket.
func (p *Pacer) release(c *paced, w *waiter, gap time.Duration, sent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sent {
		if now := p.now(); c.next.Before(now) {
			c.next = now
		}
		c.next = c.next.Add(gap)
	}
	c.line.remove(w)
}

// Limiter allows at most n sends in any window of length per, across all
// conversations of a channel: a send waits until the n-th send before it
// is a full window old. Safe for concurrent use. Senders wait in one
// line (see Pace.Wait); only the sends made count.
type Limiter struct {
	per time.Duration
	now func() time.Time
	mu  sync.Mutex
	// ring holds the times of the last n sends; i is the oldest.
	ring []time.Time
	i    int
	line line
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

// take waits for w's turn in the line and a send within the limit, and
// counts the send; on an error (ctx ended) w has left the line.
func (l *Limiter) take(ctx context.Context, w *waiter, sleep sleepFunc) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := await(ctx, &l.mu, &l.line, w, sleep, func() time.Duration {
		oldest := l.ring[l.i]
		if oldest.IsZero() {
			return 0
		}
		return oldest.Add(l.per).Sub(l.now())
	})
	if err != nil {
		return err
	}
	l.ring[l.i] = l.now()
	l.i = (l.i + 1) % len(l.ring)
	l.line.remove(w)
	return nil
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
// limits, or ctx ends; when it returns nil the caller sends at once, and
// that send is counted against both limits.
//
// Senders go first come, first served, except that a notice (notice
// true: a courtesy of the gateway's own, such as "your message was not
// taken") goes after every answer waiting in the same line: an answer
// that comes while notices wait takes the next turn. A sender whose ctx
// ends while it waits leaves its line and spends nothing, so the ones
// behind it move up. Without waiters a Wait takes a few uncontended locks
// and no timer.
func (p Pace) Wait(ctx context.Context, key string, group, notice bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	pacer := p.Pacer
	if pacer != nil && pacer.gap < 0 {
		pacer = nil
	}
	var (
		c   *paced
		pw  *waiter
		gap time.Duration
	)
	if pacer != nil {
		gap = pacer.gap
		if group {
			gap = pacer.groupGap
		}
		pw = &waiter{notice: notice}
		var err error
		if c, err = pacer.hold(ctx, key, gap, pw, sleep); err != nil {
			return err
		}
	}
	var err error
	if p.Limiter != nil {
		err = p.Limiter.take(ctx, &waiter{notice: notice}, sleep)
	}
	if pacer != nil {
		pacer.release(c, pw, gap, err == nil)
	}
	return err
}

type sleepFunc = func(ctx context.Context, d time.Duration) error

// waiter is one sender in a line.
type waiter struct {
	notice bool
	// held: past its wait, keeping its place while it waits for another
	// limit; nobody is put before it.
	held bool
	// turn is signalled (made when first needed) when the waiter may have
	// come first in the line.
	turn chan struct{}
}

// line is the senders waiting for one limit, in the order they go: the
// held one, answers, then notices, each kind first come, first served.
// The first of the line alone may pass.
type line []*waiter

// add puts w in its place.
func (l *line) add(w *waiter) {
	i := len(*l)
	if !w.notice {
		for j, o := range *l {
			if o.notice && !o.held {
				i = j
				break
			}
		}
	}
	*l = slices.Insert(*l, i, w)
}

// remove takes w out of the line, and tells the one that comes first
// after it.
func (l *line) remove(w *waiter) {
	i := slices.Index(*l, w)
	if i < 0 {
		return
	}
	*l = slices.Delete(*l, i, i+1)
	if i == 0 && len(*l) > 0 {
		if t := (*l)[0].turn; t != nil {
			select {
			case t <- struct{}{}:
			default:
			}
		}
	}
}

// await puts w in l and returns once w is first in l and wait reports no
// wait left. It is called with mu (which guards l and what wait reads)
// held and returns with it held; it sleeps and waits for its turn with
// mu unlocked. On an error (ctx ended) w has left l. Whoever is first in
// l computes its own wait and sleeps it; the others wait for the turn
// signal. Only the first passes, and what wait reads changes only when
// the first passes, so a wait once computed stays right, except when a
// later answer comes first in the line: that answer sleeps on its own,
// and the notice it passed finds, when it wakes, that it is no longer
// first.
func await(ctx context.Context, mu *sync.Mutex, l *line, w *waiter, sleep sleepFunc, wait func() time.Duration) error {
	l.add(w)
	for {
		if (*l)[0] == w {
			d := wait()
			if d <= 0 {
				return nil
			}
			mu.Unlock()
			err := sleep(ctx, d)
			mu.Lock()
			if err != nil {
				l.remove(w)
				return err
			}
			continue
		}
		if w.turn == nil {
			w.turn = make(chan struct{}, 1)
		}
		mu.Unlock()
		select {
		case <-w.turn:
			mu.Lock()
		case <-ctx.Done():
			mu.Lock()
			l.remove(w)
			return ctx.Err()
		}
	}
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
