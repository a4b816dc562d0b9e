package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Run re-queues what a crash left running, starts the channels and
// processes the queue until ctx is cancelled. Then it stops accepting,
// lets in-flight requests finish within grace and returns; what is still
// queued stays for the next start. It returns an error when a channel
// cannot start (its credential was refused, its config cannot work); a
// channel that fails otherwise is restarted while the others keep going.
func (g *Gateway) Run(ctx context.Context, grace time.Duration) error {
	n, err := g.store.RequeueRunning(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fmt.Errorf("requeue interrupted requests: %w", err)
	}
	if n > 0 {
		g.log.Info("re-queued requests interrupted by a previous stop", "count", n)
	}
	g.setAccepting(true)

	fatal := make(chan error, len(g.channels))
	chCtx, stopChannels := context.WithCancel(ctx)
	var chWG sync.WaitGroup
	for _, ch := range g.channels {
		chWG.Add(1)
		go func() {
			defer chWG.Done()
			g.supervise(chCtx, ch, fatal)
		}()
	}

	// Work runs on its own context so in-flight requests survive the
	// shutdown signal until the grace period ends.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var runErr error
	var wg sync.WaitGroup
	// A request sends on freed once its worker slot is free again: after
	// its reply is stored (delivery goes on outside the slot) or at its end.
	freed := make(chan struct{}, g.opts.Workers)
	inflight := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
loop:
	for {
		var next time.Time
		if free := g.opts.Workers - inflight; free > 0 {
			items, nx, err := g.store.Claim(workCtx, free, g.now())
			if err != nil {
				g.log.Error("claim from queue", "err", err)
				nx = g.now().Add(time.Second)
			}
			next = nx
			for _, it := range items {
				inflight++
				wg.Add(1)
				go func() {
					defer wg.Done()
					var once sync.Once
					release := func() { once.Do(func() { freed <- struct{}{} }) }
					defer release()
					g.process(workCtx, it, release)
					// The conversation is free again (or its item waits for
					// a retry): the dispatcher claims anew.
					g.poke()
				}()
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(g.now()), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			break loop
		case err := <-fatal:
			runErr = err
			break loop
		case <-freed:
			inflight--
		case <-g.wake:
		case <-timer.C:
		}
	}

	g.setAccepting(false)
	stopChannels()
	chWG.Wait()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(grace):
		g.log.Warn("shutdown grace period over; unfinished requests stay queued for the next start", "in_flight", inflight)
		cancelWork()
		<-finished
	}
	return runErr
}

// maxQuietWait is the longest server-requested wait the gateway sits out
// silently before retrying; past it the user is told at once when to try
// again (every credential and model of the failover chain is cooling).
const maxQuietWait = 30 * time.Second

// process runs one queue item to its end state. release frees the item's
// worker slot; it is called once the reply is stored (or at the end).
func (g *Gateway) process(ctx context.Context, it QueueItem, release func()) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.RequestTimeout)
	defer cancel()
	log := g.log.With("request", it.ID, "conv", it.Conversation.String(), "kind", it.Kind)
	var err error
	if it.Attempts >= g.opts.MaxAttempts {
		// Every attempt was interrupted (a crash, a kill): the message may
		// be what crashes the process, so it is not tried again.
		err = &Error{Kind: KindInvalid, Msg: fmt.Sprintf("gave up after %d interrupted attempts", it.Attempts)}
	} else {
		err = g.handle(ctx, it, log, release)
	}
	// Store writes below use a context that survives cancellation so the
	// outcome is recorded even during shutdown.
	sctx := context.WithoutCancel(ctx)
	var drop *droppedError
	switch {
	case err == nil:
		if ferr := g.store.Finish(sctx, it.ID, StatusDone, ""); ferr != nil {
			log.Error("mark request done", "err", ferr)
		}
	case errors.As(err, &drop):
		log.Info("message dropped by a pre-hook", "reason", drop.reason)
		if ferr := g.store.Finish(sctx, it.ID, StatusDone, err.Error()); ferr != nil {
			log.Error("mark request done", "err", ferr)
		}
	case errors.Is(ctx.Err(), context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// Shutdown: leave it running; the next start re-queues it.
		log.Info("request interrupted by shutdown; it will be retried at next start")
	case Transient(err) && it.Attempts+1 < g.opts.MaxAttempts && RetryAfter(err) <= maxQuietWait:
		wait := max(g.opts.Backoff(it.Attempts+1), RetryAfter(err))
		log.Warn("request failed; will retry", "attempt", it.Attempts+1, "in", wait, "err", err)
		if rerr := g.store.Retry(sctx, it.ID, g.now().Add(wait), err.Error()); rerr != nil {
			log.Error("re-queue request", "err", rerr)
		}
	default:
		log.Error("request failed", "attempts", it.Attempts+1, "err", err)
		if it.Kind == EventMessage {
			g.apologize(sctx, it, err, log)
		}
		if ferr := g.store.Finish(sctx, it.ID, StatusFailed, err.Error()); ferr != nil {
			log.Error("mark request failed", "err", ferr)
		}
	}
}

// handle runs one item; a panic in a channel, hook or the agent becomes a
// permanent failure of that item instead of a crash of the gateway.
func (g *Gateway) handle(ctx context.Context, it QueueItem, log *slog.Logger, release func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic while processing a request", "panic", p, "stack", string(debug.Stack()))
			err = &Error{Kind: KindInvalid, Msg: "an internal error occurred (logged)", Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	switch it.Kind {
	case EventMessage:
		return g.handleMessage(ctx, it, log, release)
	case EventReaction:
		return g.handleReaction(ctx, it, log, release)
	}
	return Errorf(KindInvalid, "unknown queue item kind %q", it.Kind)
}

// handleMessage answers one message: a reply stored by an earlier attempt
// is only delivered again; otherwise the pipeline produces the answer,
// which is stored, the worker slot released, and the answer sent.
func (g *Gateway) handleMessage(ctx context.Context, it QueueItem, log *slog.Logger, release func()) error {
	in := *it.Message
	ch, ok := g.channels[in.Conversation.Channel]
	if !ok {
		return Errorf(KindInvalid, "channel %q is not enabled; enable channels.%s in the config to answer its queued messages", in.Conversation.Channel, in.Conversation.Channel)
	}
	if r, err := g.store.ReplyForRequest(ctx, it.ID, it.Conversation); err != nil {
		return err
	} else if r != nil {
		release()
		return g.deliver(ctx, ch, in, r)
	}
	if ind, ok := ch.(Indicator); ok {
		stop := ind.Working(ctx, in)
		defer stop()
	}
	sess, err := g.store.ActiveSession(ctx, in.Conversation)
	if err != nil {
		return err
	}
	ans, err := g.answerMessage(ctx, CommandRequest{RequestID: it.ID, In: in, Session: sess}, log)
	if err != nil {
		return err
	}
	r, err := g.saveReply(ctx, ch, it.ID, sess.ID, in.Conversation, ans)
	if err != nil {
		return err
	}
	release()
	return g.deliver(ctx, ch, in, r)
}
