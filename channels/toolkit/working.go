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
	w := newWorking(ctx, o)
	w.start()
	var once sync.Once
	return func() { once.Do(w.stop) }
}

func newWorking(ctx context.Context, o WorkingOptions) *working {
	if o.Every <= 0 {
		o.Every = 4 * time.Second
	}
	return &working{ctx: ctx, o: o}
}

// start sends the ack and the first typing, in a goroutine of their own.
func (w *working) start() {
	w.calls.Add(1)
	go func() {
		defer w.calls.Done()
		if w.o.Ack != nil {
			w.o.Ack(w.ctx)
		}
		w.typing()
	}()
}

// working is one indicator started by Working.
type working struct {
	ctx context.Context
	o   WorkingOptions

	mu      sync.Mutex
	stopped bool
	next    *time.Timer
	// held counts the messages being sent in the indicator's place
	// (Quiet): typing is held back while one is, and until quietUntil
	// after; typingNow is closed when the typing call under way returns.
	held       int
	quietUntil time.Time
	typingNow  chan struct{}
	// calls counts the indicator calls under way.
	calls sync.WaitGroup
}

// typing shows the typing indicator and sets the timer for the next
// one, unless the indicator is stopped or its work is over.
func (w *working) typing() {
	if w.o.Typing == nil || w.ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	var done chan struct{}
	if w.held == 0 && !time.Now().Before(w.quietUntil) {
		done = make(chan struct{})
		w.typingNow = done
	}
	w.mu.Unlock()
	if done != nil {
		w.o.Typing(w.ctx)
		close(done)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.typingNow == done {
		w.typingNow = nil
	}
	if !w.stopped {
		w.next = time.AfterFunc(w.o.Every, w.repeat)
	}
}

// quiet holds typing back until sent is called, and for one period
// after, and waits for a typing call under way (or for ctx).
func (w *working) quiet(ctx context.Context) (sent func()) {
	w.mu.Lock()
	w.held++
	now := w.typingNow
	w.mu.Unlock()
	sent = func() {
		w.mu.Lock()
		w.held--
		w.quietUntil = time.Now().Add(w.o.Every)
		w.mu.Unlock()
	}
	if now == nil {
		return sent
	}
	select {
	case <-now:
	case <-ctx.Done():
	}
	return sent
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

// Indicators keeps a channel's working indicators by the place they show
// in (a chat, a topic), so that a message sent there can quiet them
// first (Quiet). A platform clears a typing indicator when the bot's
// message arrives; one that reaches it after the message shows
// "typing…" for seconds under an answer already given, as a command's
// reply, or any answer faster than the indicator's own call, would meet.
// The zero value is ready to use. Safe for concurrent use.
type Indicators struct {
	mu sync.Mutex
	at map[string]map[*working]struct{}
}

// Working is Working for an indicator shown in place.
func (is *Indicators) Working(ctx context.Context, place string, o WorkingOptions) (stop func()) {
	w := newWorking(ctx, o)
	is.mu.Lock()
	if is.at == nil {
		is.at = map[string]map[*working]struct{}{}
	}
	if is.at[place] == nil {
		is.at[place] = map[*working]struct{}{}
	}
	is.at[place][w] = struct{}{}
	is.mu.Unlock()
	w.start()
	var once sync.Once
	return func() {
		once.Do(func() {
			is.mu.Lock()
			delete(is.at[place], w)
			if len(is.at[place]) == 0 {
				delete(is.at, place)
			}
			is.mu.Unlock()
			w.stop()
		})
	}
}

// Quiet is called before a message is sent in place: it waits for a
// typing call under way there (or until ctx ends) and holds the typing
// of place's indicators back until the returned sent is called (when
// the send is over, however it ended), and for one period
// (WorkingOptions.Every) after, so none reaches the platform after the
// message: a send can wait far longer than a period (its turn in a
// group's pace, a retry, a large file's upload). Work that goes on after
// the message shows typing again at its next repeat. sent may be called
// more than once.
func (is *Indicators) Quiet(ctx context.Context, place string) (sent func()) {
	is.mu.Lock()
	var ws []*working
	for w := range is.at[place] {
		ws = append(ws, w)
	}
	is.mu.Unlock()
	done := make([]func(), 0, len(ws))
	for _, w := range ws {
		done = append(done, w.quiet(ctx))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, f := range done {
				f()
			}
		})
	}
}
