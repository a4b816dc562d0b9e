package clock

import (
	"context"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// Sleep waits d or until ctx is done, whichever comes first, and then
	// returns ctx.Err() (nil when the whole wait passed).
	Sleep(ctx context.Context, d time.Duration) error
	// NewTimer is time.NewTimer on this clock.
	NewTimer(d time.Duration) Timer
	// NewTicker is time.NewTicker on this clock; d must be positive.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned timer is stopped first. The timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a *time.Timer as an interface.
type Timer interface {
	// C delivers the time the timer fired (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; false when it already fired or
	// was stopped.
	Stop() bool
	// Reset makes the timer fire after d; false when it had fired or was
	// stopped before.
	Reset(d time.Duration) bool
}

// Ticker is a *time.Ticker as an interface.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
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

// NewTimer is time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker is time.NewTicker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Or returns c, or Real when c is nil: for options whose zero value means
// the system clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
