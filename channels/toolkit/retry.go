package toolkit

import (
	"context"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// RetryOptions configure Retry. Every field is optional.
type RetryOptions struct {
	// Attempts is how often fn is tried in all (default 3).
	Attempts int
	// Base is the wait after the first failure (default 500ms); it doubles
	// after each further failure, up to Max (default 15s). When the error
	// asks for a longer wait (core.RetryAfter), that wait is taken.
	Base, Max time.Duration
	// Retryable says whether trying again may work (default core.Transient).
	Retryable func(error) bool
	// Sleep waits (default Sleep); tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, when set, is told of each failed attempt that is tried
	// again and of the wait before it (for the log).
	OnRetry func(attempt int, wait time.Duration, err error)
}

// Retry calls fn until it succeeds, fails with an error Retryable refuses
// (returned as it is), the attempts are spent, or ctx ends. When it gives
// up, the error says after how many attempts and wraps fn's last error.
func Retry(ctx context.Context, o RetryOptions, fn func(ctx context.Context) error) error {
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Base <= 0 {
		o.Base = 500 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 15 * time.Second
	}
	if o.Retryable == nil {
		o.Retryable = core.Transient
	}
	if o.Sleep == nil {
		o.Sleep = Sleep
	}
	wait := o.Base
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !o.Retryable(err) {
			return err
		}
		if attempt >= o.Attempts {
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		d := max(min(wait, o.Max), core.RetryAfter(err))
		if o.OnRetry != nil {
			o.OnRetry(attempt, d, err)
		}
		if serr := o.Sleep(ctx, d); serr != nil {
			return fmt.Errorf("stopped retrying after %d attempts (%w): %w", attempt, serr, err)
		}
		wait *= 2
	}
}
