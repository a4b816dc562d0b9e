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

// Working starts the indicator and returns the function that stops it;
// stop waits for a call under way (and then takes the ack back) and may
// be called more than once. The ack and the first typing go out at once,
// in a goroutine of their own that ends with them; the repeats run from
// a timer, so work in flight holds no goroutine for its indicator.
func Working(ctx context.Context, o WorkingOptions) (stop func()) {
	if o.Every <= 0 {
		o.Every = 4 * time.Second
	}
	w := &working{ctx: ctx, o: o}
	w.calls.Add(1)
	go func() {
		defer w.calls.Done()
		if o.Ack != nil {
			o.Ack(ctx)
		}
		w.typing()
	}()
	var once sync.Once
	return func() { once.Do(w.stop) }
}

// working is one indicator started by Working.
type working struct {
	ctx context.Context
	o   WorkingOptions

	mu      sync.Mutex
	stopped bool
	next    *time.Timer
	// calls counts the indicator calls under way.
	calls sync.WaitGroup
}

// typing shows the typing indicator and sets the timer for the next
// one, unless the indicator is stopped or its work is over.
func (w *working) typing() {
	if w.o.Typing == nil || w.ctx.Err() != nil {
		return
	}
	w.o.Typing(w.ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.next = time.AfterFunc(w.o.Every, w.repeat)
	}
}

// repeat is the timer's call of typing.
func (w *working) repeat() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.calls.Add(1)
	w.mu.Unlock()
	defer w.calls.Done()
	w.typing()
}

// stop ends the repeats, waits for a call under way and takes the ack
// back (unless the work's context ended first).
func (w *working) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.next != nil {
		w.next.Stop()
	}
	w.mu.Unlock()
	w.calls.Wait()
	if w.o.Unack != nil && w.ctx.Err() == nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), unackTimeout)
		w.o.Unack(uctx)
		cancel()
	}
}
