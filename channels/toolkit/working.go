package toolkit

import (
	"context"
	"sync"
	"time"
)

// WorkingOptions describe how a platform shows that the bot is working
// on a message. Every func is optional.
type WorkingOptions struct {
	// Typing shows the typing indicator once; it is repeated every Every
	// (default 4s) until the work is done.
	Typing func(ctx context.Context)
	Every  time.Duration
	// Ack puts the ack reaction on the user's message; Unack takes it
	// back when the work is done (with a fresh context: the request's may
	// be over by then).
	Ack, Unack func(ctx context.Context)
}

// unackTimeout bounds taking the ack reaction back.
const unackTimeout = 10 * time.Second

// Working starts the indicator loop and returns the function that stops
// it; stop waits for the loop to end and may be called more than once.
func Working(ctx context.Context, o WorkingOptions) (stop func()) {
	if o.Every <= 0 {
		o.Every = 4 * time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if o.Ack != nil {
			o.Ack(ctx)
		}
		var tick <-chan time.Time
		if o.Typing != nil {
			t := time.NewTicker(o.Every)
			defer t.Stop()
			tick = t.C
		}
		for {
			if o.Typing != nil {
				o.Typing(ctx)
			}
			select {
			case <-done:
				if o.Unack != nil {
					uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unackTimeout)
					o.Unack(uctx)
					cancel()
				}
				return
			case <-ctx.Done():
				return
			case <-tick:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
		})
	}
}
