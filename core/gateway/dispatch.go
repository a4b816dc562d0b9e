package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// Run starts the channels and processes the queue until ctx is
// cancelled. Then it stops accepting, lets in-flight requests finish
// within grace and returns; what is still queued stays for the next
// start. It returns an error when a channel cannot start (its credential
// was refused, its config cannot work); a channel that fails otherwise is
// restarted while the others keep going.
//
// Every item is worked on under the store's lease, renewed while the work
// goes on (Options.LeaseTTL); a lease that is lost (the store handed the
// item to another claimer after it ran out) stops the work, and the
// outcome is not written. What a crash left running is taken back by the
// store once its lease ends (at once by a sole claimer), counted as an
// interruption.
func (g *Gateway) Run(ctx context.Context, grace time.Duration) error {
	// Work runs on its own context so in-flight requests survive the
	// shutdown signal until the grace period ends.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	p := &workers{ctx: workCtx, size: int64(g.opts.Workers), freed: make(chan struct{}, g.opts.Workers)}
	p.free.Store(int64(g.opts.Workers))
	g.pool.Store(p)
	g.setAccepting(true)
	// Other replicas' stops are heard until the loop ends (a fatal
	// channel error ends it too, with ctx still running).
	stopsCtx, endStops := context.WithCancel(ctx)
	defer endStops()
	g.listenStops(stopsCtx)

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

	// Another gateway over the same database enqueued: claim again.
	// A gateway alone on its database looks at the queue when told (an
	// enqueue, a freed conversation) or when a head becomes due; one of
	// several also polls, in case a notification is lost.
	var others <-chan struct{}
	idle := time.Minute
	if w, ok := g.store.(core.QueueWaker); ok {
		if others = w.QueueWake(); others != nil {
			idle = 2 * time.Second
		}
	}

	var runErr error
	timer := g.clock.NewTimer(time.Hour)
	defer timer.Stop()
	// claim says the loop should look at the queue; saturated that the
	// last claim filled every free slot (a freed slot may then find work
	// at once). A slot freed otherwise finds nothing new: the item that
	// freed it still holds its conversation, and it pokes when done.
	claim, saturated := true, false
	var next time.Time
	var claimErrs clock.Repeat // a store that is down fails every claim
loop:
	for {
		if claim {
			// A slot is taken for each item claimed, not held during the
			// claim: an enqueue meanwhile may take one for its own item.
			if free := p.free.Load(); free > 0 {
				claimed := g.beginClaim()
				items, nx, err := g.store.Claim(workCtx, int(free), g.now())
				if err != nil {
					if report, since, n := claimErrs.Failed(g.now()); report {
						g.log.Error("claim from queue; trying again every second", "failing_since", since, "failures_not_logged", n, "err", err)
					}
					nx = g.now().Add(time.Second)
				} else if failed, since := claimErrs.Recovered(); failed {
					g.log.Info("claims from the queue work again", "failed_for", g.now().Sub(since).Round(time.Second))
				}
				next, saturated = nx, len(items) == int(free)
				// Items wait for a slot while a claim fills them all: an
				// enqueue then only queues, so they go first.
				p.backlog.Store(saturated)
				for _, it := range items {
					if g.adopt(it) {
						continue
					}
					if !p.take() {
						// An enqueue took the last slot: the item waits, as it
						// was, for the next one freed.
						if err := g.store.Release(workCtx, it.ID, it.Lease); err != nil {
							g.log.Error("put a claimed item back for a free worker", "request", it.ID, "err", err)
						}
						saturated = true
						p.backlog.Store(true)
						continue
					}
					if it.NotBefore.IsZero() && it.Attempts == 0 && it.Interruptions == 0 {
						// A first claim: the time it waited since it was accepted.
						g.obs.Stage(it.Conversation.Channel, core.StageQueue, g.now().Sub(it.CreatedAt))
					}
					g.start(p, it)
				}
				claimed()
			} else {
				// Work may wait for a slot: look again when one is freed.
				saturated = true
				p.backlog.Store(true)
			}
			if saturated {
				// A freed slot wakes the next claim; until then a due
				// time (a running head's lease end) would only spin.
				next = time.Time{}
			}
		}
		if p.free.Load() > 0 && !p.backlog.Load() {
			// Aside commands that found no free worker.
			g.retryAsides(workCtx)
		}
		wait := idle
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
		case <-p.freed:
			claim = saturated
			continue
		case <-g.wake:
		case <-others:
		case <-timer.C():
		}
		claim = true
	}
	endStops()
	// No slot is free from now on; an enqueue that took one before
	// starts its item (or gives the slot back) before the wait below.
	p.free.Add(-stopped)
	for p.reserving.Load() > 0 {
		time.Sleep(time.Millisecond)
	}

	g.setAccepting(false)
	stopChannels()
	chWG.Wait()
	if runErr == nil {
		// A channel refused (its credential, the config) as the stop
		// came: the run failed, whichever the loop saw first.
		select {
		case runErr = <-fatal:
		default:
		}
	}
	finished := make(chan struct{})
	go func() { p.wg.Wait(); close(finished) }()
	// The grace is wall time: a test's fake clock must not keep a
	// shutdown waiting for ever.
	select {
	case <-finished:
	case <-time.After(grace):
		g.log.Warn("shutdown grace period over; unfinished requests stay queued for the next start", "in_flight", int64(g.opts.Workers)-(p.free.Load()+stopped))
		cancelWork()
		<-finished
	}
	g.side.Wait()
	return runErr
}

// workers is the worker pool of a running gateway. free counts the free
// slots: the dispatcher takes one for each item it claimed, an enqueue
// one for the item it claims itself (core.EnqueueClaimer); reserving
// counts the enqueues holding a slot, which the shutdown waits for.
type workers struct {
	ctx       context.Context
	size      int64 // slots in all (queue.workers)
	wg        sync.WaitGroup
	freed     chan struct{}
	free      atomic.Int64
	reserving atomic.Int64
	// backlog says queued items may be waiting for a slot: an enqueue
	// does not take one then (they are older), the dispatcher does.
	backlog atomic.Bool
}

// stopped is taken off the free slots when Run stops: none is free again.
const stopped = 1 << 40

// reserve takes a free slot for an enqueue that may claim its item; the
// caller then either starts the item (start) or gives the slot back
// (unreserve), and calls done.
func (p *workers) reserve() bool {
	if p.backlog.Load() {
		return false
	}
	p.reserving.Add(1)
	if !p.take() {
		p.reserving.Add(-1)
		return false
	}
	return true
}

// take takes a free slot, if there is one.
func (p *workers) take() bool {
	for {
		f := p.free.Load()
		if f <= 0 {
			return false
		}
		if p.free.CompareAndSwap(f, f-1) {
			return true
		}
	}
}

// unreserve gives a slot back and tells the dispatcher, which may have
// found none free meanwhile.
func (p *workers) unreserve() {
	p.free.Add(1)
	p.tellFreed()
}

// tellFreed wakes the dispatcher for a freed slot.
func (p *workers) tellFreed() {
	select {
	case p.freed <- struct{}{}:
	default: // the dispatcher has been told already
	}
}
func (p *workers) done() { p.reserving.Add(-1) }

// busy is the number of slots taken (past any count once Run stopped).
func (p *workers) busy() int64 { return p.size - p.free.Load() }

// yieldBusy is the most slots taken at which an enqueue that started its
// item yields to it before its flush (Gateway.enqueue).
const yieldBusy = 2

// start works on a claimed item in a slot of p. The slot is free again
// once the reply is stored (delivery goes on outside the slot) or at the
// end; then the dispatcher is told, and when the conversation is free
// again (or its item waits for a retry) it claims anew.
func (g *Gateway) start(p *workers, it core.QueueItem) { g.startAfter(p, it, nil, nil) }

// startAfter is start whose work waits for after to close first (nil:
// at once; see process) and calls ended (if not nil) once the item is
// worked on.
func (g *Gateway) startAfter(p *workers, it core.QueueItem, after <-chan struct{}, ended func()) {
	p.wg.Add(1)
	go func() {
		growStack()
		defer p.wg.Done()
		if ended != nil {
			defer ended()
		}
		var once sync.Once
		release := func() {
			once.Do(func() {
				p.free.Add(1)
				p.tellFreed()
			})
		}
		defer release()
		g.process(p.ctx, it, release, after)
		g.poke()
	}()
}

// durableKey carries the Durable of the item being worked on
// (core.QueueItem).
type durableKey struct{}

// awaitDurable returns once the item being worked on in ctx has reached
// the disk (at once for an item claimed after it had): nothing the user
// sees is sent before, so a crash before the flush, which loses the item
// and leaves the platform unacknowledged, never leaves an answer to a
// message the platform then delivers again.
func awaitDurable(ctx context.Context) {
	// The flush always ends (the channel is closed after it, whatever
	// its outcome): no context bounds the wait.
	if d, _ := ctx.Value(durableKey{}).(<-chan struct{}); d != nil {
		<-d
	}
}

// errLeaseLost ends the work on an item whose lease another claimer took.
var errLeaseLost = fmt.Errorf("stopped: %w", core.ErrLeaseLost)

// leaseFenceKey carries the leaseFence of the item being worked on
// (process), for the sends to check and the store writes to name.
type leaseFenceKey struct{}

// leaseFence is the lease of an item being worked on in this process: the
// token its store calls name, and until when the work may still send — a
// sixth of the lease TTL before the lease, as last claimed or renewed,
// would run out (no bound without a TTL). A process that stalled past it
// (a paused VM or container, a long swap) may have lost the item to
// another claimer, which answers it; the next renewal would find out, but
// a send right after the stall would come first, a second answer, out of
// order.
//
// A claim of this process that took the item back (its lease ran out
// while the store was out of reach; Gateway.adopt) hands the new token
// over, and the work goes on under it: it must not run twice here, and
// what it sent must be recorded, not sent again.
type leaseFence struct {
	mu    sync.Mutex
	lease int64
	until time.Time // zero: no TTL
	lost  bool
	// conv is the item's conversation (what /stop names); keep says /stop
	// leaves the work alone: it is /stop itself, a command answered aside
	// (beside messages that only wait: no answer is being written), or
	// its answer is written already and only storing and sending it are
	// left (pastStop). keep is guarded by Gateway.mu, as flights is.
	conv core.ConversationKey
	keep bool
	// ended: the work wrote the item's outcome (or gave up writing it)
	// or returned; it holds the item no longer, and a claim that finds
	// the item due again runs it (adopt says no).
	ended  bool
	cancel context.CancelCauseFunc
}

// end says the work no longer holds the item (see ended).
func (f *leaseFence) end() {
	f.mu.Lock()
	f.ended = true
	f.mu.Unlock()
}

// token is the lease the work's store calls name.
func (f *leaseFence) token() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lease
}

// extend moves the fence for a lease renewed (or claimed) at t.
func (f *leaseFence) extend(t time.Time, ttl time.Duration) {
	f.mu.Lock()
	f.until = t.Add(ttl - ttl/6)
	f.mu.Unlock()
}

// held says the work may still send at now; past the fence it stops the
// work (the item's outcome is another claimer's) and says no.
func (f *leaseFence) held(now time.Time) bool {
	f.mu.Lock()
	ok := !f.lost && (f.until.IsZero() || now.Before(f.until))
	if !ok {
		f.lost = true
	}
	f.mu.Unlock()
	if !ok {
		f.cancel(errLeaseLost)
	}
	return ok
}

// lose stops the work when the store said lease is lost, unless a claim
// of this process handed a newer one over meanwhile (adopt). It reports
// whether the work lost the item.
func (f *leaseFence) lose(lease int64) bool {
	f.mu.Lock()
	lost := f.lost || f.lease == lease
	f.lost = lost
	f.mu.Unlock()
	if lost {
		f.cancel(errLeaseLost)
	}
	return lost
}

// adopt hands over the lease of a claim (at now) that took the item back
// from this very work. It reports false when the work has already lost
// the item (it stops, and the claim runs it anew), or no longer holds
// it: its outcome was written (a retry, a wait, whose item the claim
// found due again) or the work ended (the claim runs it).
func (f *leaseFence) adopt(lease int64, now time.Time, ttl time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost || f.ended {
		return false
	}
	if f.until.IsZero() || now.Before(f.until) {
		// Its lease has not run out by the work's own count: the claim
		// did not take the item back from it, but found it queued (the
		// work's outcome committed, put back to wait, and the work not
		// yet ended): the claim's run is a new try.
		return false
	}
	f.lease = lease
	if ttl > 0 {
		f.until = now.Add(ttl - ttl/6)
	}
	return true
}

// leaseOf is the lease token the work on it in ctx names: the claim's,
// or the one a later claim of this process handed over (adopt).
func leaseOf(ctx context.Context, it core.QueueItem) int64 {
	if f, _ := ctx.Value(leaseFenceKey{}).(*leaseFence); f != nil {
		return f.token()
	}
	return it.Lease
}

// mayStillSend says whether the work of ctx may send now (no fence:
// yes); errLeaseLost when not.
func (g *Gateway) mayStillSend(ctx context.Context) error {
	if f, _ := ctx.Value(leaseFenceKey{}).(*leaseFence); f != nil && !f.held(g.clock.Now()) {
		return errLeaseLost
	}
	return nil
}

// holdLease renews the lease of it (fence's token) every third of the
// lease TTL until the returned stop is called; when the store says the
// lease is lost it stops the work (fence.lose) at once. Without a TTL it
// does nothing. The renewals run on a timer, not a goroutine of their
// own: most answers end before the first renewal is due, so an item in
// flight holds no goroutine, stack or ticker for it. stop returns once no
// renewal runs or will run.
func (g *Gateway) holdLease(ctx context.Context, it core.QueueItem, fence *leaseFence, log *slog.Logger) (stop func()) {
	if g.opts.LeaseTTL <= 0 {
		return func() {}
	}
	// The claim was taken just before the work started: the fence's
	// margin (a sixth of the TTL) covers the difference.
	fence.extend(g.clock.Now(), g.opts.LeaseTTL)
	r := &renewal{g: g, ctx: ctx, id: it.ID, fence: fence, log: log, every: g.opts.LeaseTTL / 3}
	r.mu.Lock()
	r.timer = g.clock.AfterFunc(r.every, r.renew)
	r.mu.Unlock()
	return r.stop
}

// renewal is holdLease's renewing of one item's lease: one value per
// item rather than a closure over each of its variables.
type renewal struct {
	g     *Gateway
	ctx   context.Context
	id    int64
	fence *leaseFence
	log   *slog.Logger
	every time.Duration

	mu       sync.Mutex
	stopped  bool
	timer    clock.Timer
	renewing sync.WaitGroup
}

// renew renews the lease once and sets the timer for the next renewal.
func (r *renewal) renew() {
	g, fence, log := r.g, r.fence, r.log
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.renewing.Add(1)
	r.mu.Unlock()
	defer r.renewing.Done()
	t0 := g.clock.Now()
	lease := fence.token()
	err := g.store.Renew(context.WithoutCancel(r.ctx), r.id, lease)
	switch {
	case errors.Is(err, core.ErrLeaseLost):
		// A claim of this process under way may be the one that took
		// the item back: it hands the lease over first.
		log.Debug("renew the request's lease: lost; waiting for this process's claim under way, which may hand it over", "lease", lease)
		g.awaitClaim(g.stopCtx())
		if fence.lose(lease) {
			log.Warn("the request's lease was taken back (it ran out); another claimer answers it, this work stops", "queue.lease_ttl", g.opts.LeaseTTL)
			return
		}
		// A claim of this process took the item back meanwhile and
		// handed its lease over (adopt): the work goes on under it.
	case err != nil:
		// The next renewal may succeed; the lease still runs.
		log.Warn("renew the request's lease", "err", err)
	default:
		fence.extend(t0, g.opts.LeaseTTL)
	}
	// The next one is due a third of the TTL after this one was,
	// however long the store took.
	next := max(r.every-g.clock.Now().Sub(t0), 0)
	r.mu.Lock()
	if !r.stopped {
		r.timer = g.clock.AfterFunc(next, r.renew)
	}
	r.mu.Unlock()
}

// stop ends the renewals; it returns once none runs or will run.
func (r *renewal) stop() {
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	r.mu.Unlock()
	r.renewing.Wait()
}

// beginClaim marks a claim of the dispatcher under way until the
// returned end is called, once the items it took back from work in
// flight here were handed over (adopt).
func (g *Gateway) beginClaim() (end func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.claiming = gate
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.claiming = nil
		g.mu.Unlock()
		close(gate)
	}
}

// awaitClaim returns once the dispatcher's claim under way, if any, has
// handed over the leases it took back from work in flight here, or stop
// ends. A write that found its lease lost calls it before giving the item
// up: the claim that bumped the token ran before the write, and may be
// this process's, its hand-over still to come. The dispatcher claims one
// at a time, so a claim that is not under way any more has handed over.
func (g *Gateway) awaitClaim(stop context.Context) {
	g.mu.Lock()
	gate := g.claiming
	g.mu.Unlock()
	if gate == nil {
		return
	}
	select {
	case <-gate:
	case <-stop.Done():
	}
}

// stopCtx ends when the work of the running gateway must stop: the
// shutdown's grace is over (Background when not running).
func (g *Gateway) stopCtx() context.Context {
	if p := g.pool.Load(); p != nil {
		return p.ctx
	}
	return context.Background()
}

// adopt hands the lease of a claimed item that is still being worked on
// in this process to that work, and reports whether it did: the item's
// lease ran out while the store was out of reach (the work could neither
// renew it nor record its outcome), and this process's own claim took it
// back once the store answered again. Running it a second time would
// send its answer again; the work records it under the new lease
// instead.
func (g *Gateway) adopt(it core.QueueItem) bool {
	g.mu.Lock()
	f := g.flights[it.ID]
	g.mu.Unlock()
	if f == nil || !f.adopt(it.Lease, g.clock.Now(), g.opts.LeaseTTL) {
		return false
	}
	g.log.Warn("took back the lease of a request still being worked on here (it ran out while the store was out of reach); the work goes on under the new lease", "request", it.ID, "conv", it.Conversation.String())
	if r, ok := g.store.(uninterrupter); ok {
		// The claim counted an interruption the work never had; repeated
		// outages must not add up to the poison-message guard's give-up.
		g.side.Add(1)
		go func() {
			defer g.side.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.NotInterrupted(ctx, it.ID, it.Lease); err != nil && !errors.Is(err, core.ErrLeaseLost) {
				g.log.Warn("take back the interruption the claim counted; it stays counted", "request", it.ID, "err", err)
			}
		}()
	}
	return true
}

// uninterrupter is the store's NotInterrupted (store.DB): it takes back
// the interruption a claim counted when it took back an item whose work
// was still under way here (adopt).
type uninterrupter interface {
	NotInterrupted(ctx context.Context, id, lease int64) error
}

// waitNote is the note (core.WithWaitNote) of item it's work: the store
// marks the item as only waiting while one of its calls waits for a
// provider's slot (core.WaitMarker), so a crash meanwhile does not count
// against it. A note once the work has ended (end called) changes
// nothing.
func waitNote(ctx context.Context, m core.WaitMarker, it core.QueueItem, log *slog.Logger) (note func(waiting bool), end func()) {
	ctx = context.WithoutCancel(ctx)
	var (
		mu      sync.Mutex
		waiters int
		ended   bool
	)
	note = func(waiting bool) {
		mu.Lock()
		defer mu.Unlock()
		if waiting {
			waiters++
		} else {
			waiters--
		}
		// Only the first wait and the end of the last are recorded.
		if ended || waiting && waiters != 1 || !waiting && waiters != 0 {
			return
		}
		switch err := m.MarkWaiting(ctx, it.ID, leaseOf(ctx, it), waiting); {
		case err != nil:
			log.Warn("record whether the request only waits for a provider's slot", "waiting", waiting, "err", err)
		case waiting:
			log.Debug("the request waits for its provider's slot (a crash meanwhile does not count against it)")
		default:
			log.Debug("the request has its provider's slot")
		}
	}
	end = func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	}
	return note, end
}

// quietDelay is how late a failure may make an answer (counted from the
// message's arrival to the next try) before the user is told, once, that
// it is delayed and why — whatever failure it is (an interruption, whose
// next try is its answer, is not told).
const quietDelay = 5 * time.Second

// process runs one queue item to its end state. release frees the item's
// worker slot; it is called once the reply is stored (or at the end).
//
// after, when not nil, is waited for once the lease is held (renewed
// meanwhile): the end of the command answered aside before it.
func (g *Gateway) process(ctx context.Context, it core.QueueItem, release func(), after <-chan struct{}) {
	if it.Durable != nil {
		ctx = context.WithValue(ctx, durableKey{}, it.Durable)
	}
	log := lazyWith(g.log, "request", it.ID, "conv", it.Conversation.String(), "kind", it.Kind)
	leased, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	keep := it.Behind != nil || it.Message != nil && g.isStop(it.Message.Text)
	fence := &leaseFence{lease: it.Lease, cancel: lose, conv: it.Conversation, keep: keep}
	g.mu.Lock()
	g.flights[it.ID] = fence
	g.mu.Unlock()
	defer func() {
		fence.end() // a claim that read flights before the delete runs the item
		g.mu.Lock()
		if g.flights[it.ID] == fence { // not a later try's, started meanwhile
			delete(g.flights, it.ID)
		}
		g.mu.Unlock()
	}()
	stopRenewing := g.holdLease(ctx, it, fence, log)
	defer stopRenewing()
	leased = context.WithValue(leased, leaseFenceKey{}, fence)
	if after != nil {
		select {
		case <-after:
		case <-leased.Done():
		}
	}
	ctx, cancel := context.WithTimeout(leased, g.opts.RequestTimeout)
	defer cancel()
	if m, ok := g.store.(core.WaitMarker); ok {
		note, end := waitNote(ctx, m, it, log)
		defer end()
		ctx = core.WithWaitNote(ctx, note)
	}
	log.Debug("processing request", "attempts", it.Attempts, "interruptions", it.Interruptions)
	g.waited(it.ID)
	var err error
	// held is the last sent part's record, written with the finish.
	var held *core.PartSent
	hold := &held
	if _, ok := g.store.(core.SentFinisher); !ok {
		hold = nil
	}
	if it.Interruptions >= g.opts.MaxAttempts {
		// Every attempt since the last that ended normally was cut short
		// (a crash, a kill; the store starts the count over when a try
		// puts the item back to wait): the message may be what crashes
		// the process, so it is not tried again.
		err = &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("gave up after %d interrupted attempts", it.Interruptions)}
	} else {
		err = g.handle(ctx, it, log, release, hold)
	}
	// No renewal after the work: one racing the finish found the item
	// done and reported its lease lost.
	stopRenewing()
	g.settle(ctx, it, err, log, held)
}

// settle records an item's outcome: done, dropped, released at shutdown,
// waiting for a cooling provider, retried, or failed.
//
// held is the record of the answer's last sent part, to be written with
// the finish (nil: none).
func (g *Gateway) settle(ctx context.Context, it core.QueueItem, err error, log *slog.Logger, held *core.PartSent) {
	// Store writes use a context that survives cancellation so the
	// outcome is recorded even during shutdown.
	sctx := context.WithoutCancel(ctx)
	if held != nil && (err != nil || errors.Is(context.Cause(ctx), core.ErrLeaseLost)) {
		// The part was sent, whatever happens to the item.
		g.write(sctx, log, it, "record a sent part", func(c context.Context, _ int64) error {
			return g.store.MarkSent(c, held.ReplyID, held.Part, held.PlatformID)
		})
		held = nil
	}
	var drop *droppedError
	var undelivered *deliveryError
	outcome := core.OutcomeFailed
	switch {
	case errors.Is(context.Cause(ctx), core.ErrLeaseLost):
		// Another claimer holds the item now: its outcome is theirs.
		outcome = core.OutcomeReleased
		log.Warn("request stopped: its lease was lost", "err", err)
	case err == nil:
		outcome = core.OutcomeAnswered
		// Logged once it is recorded: a crash before the record answers
		// the request again (see README, the window without idempotency
		// keys), and the log must not say it was done.
		g.record(sctx, log, it, "mark request done", func(c context.Context, lease int64) error {
			if f, ok := g.store.(core.SentFinisher); ok && held != nil {
				return f.FinishSent(c, it.ID, lease, *held)
			}
			return g.store.Finish(c, it.ID, lease, core.StatusDone, "")
		})
		log.Debug("request done")
	case errors.As(err, &drop):
		outcome = core.OutcomeDropped
		log.Info("message dropped by a pre-hook", "reason", drop.reason)
		g.record(sctx, log, it, "mark request done", func(c context.Context, lease int64) error {
			return g.store.Finish(c, it.ID, lease, core.StatusDone, err.Error())
		})
	case errors.Is(context.Cause(ctx), errStopped):
		// /stop: the answer ends where it is (what was sent stays), and
		// the item is done; /stop, next in the conversation, says so.
		outcome = core.OutcomeDropped
		log.Info("request stopped by /stop")
		g.record(sctx, log, it, "mark request stopped", func(c context.Context, lease int64) error {
			return g.store.Finish(c, it.ID, lease, core.StatusDone, core.StopCause)
		})
	case errors.Is(ctx.Err(), context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		// Shutdown: back to the queue as it was; a deploy is no attempt.
		outcome = core.OutcomeReleased
		log.Info("request interrupted by shutdown; it is answered after the next start")
		g.record(sctx, log, it, "release request", func(c context.Context, lease int64) error { return g.store.Release(c, it.ID, lease) })
	case errors.As(err, &undelivered) && core.Passing(err):
		// The answer is stored and the platform failed its send (a 5xx,
		// a broken connection, flood control): it is sent when the
		// platform takes it again, however many tries that takes. Giving
		// up could only tell the user through the same platform, and
		// would leave them with nothing (the stored answer unsent, the
		// request failed). A failure of no known kind is no such promise:
		// it counts as an attempt, so a send that can never succeed does
		// not hold its conversation for ever.
		outcome = core.OutcomeRetried
		g.retryTelling(sctx, it, err, log, "the answer could not be sent; it is sent again later")
	case errors.As(err, &undelivered) && errors.Is(err, core.ErrRecipientGone) && it.Kind != core.EventScheduled && (it.Message == nil || it.Message.Origin == ""):
		// Blocked, or removed from the group: nobody is left to tell, so
		// no apology is sent into the same refusal and the operator is
		// not paged for a user's choice. Logged once an hour per chat. A
		// schedule's firing, and a message a plugin injected, still fail
		// as before: their chat is the operator's (or the schedule's
		// creator's) to fix.
		outcome = core.OutcomeDropped
		if g.noticeDueEvery("gone:"+it.Conversation.String(), time.Hour) {
			log.Info("the chat takes no more messages from the bot (the user blocked it, or it was removed from the group); its answers are dropped", "err", err)
		}
		g.record(sctx, log, it, "mark request failed", func(c context.Context, lease int64) error {
			return g.store.Finish(c, it.ID, lease, core.StatusFailed, err.Error())
		})
	case waits(err):
		outcome = g.wait(sctx, it, err, log)
	case core.Transient(err) && it.Attempts+1 < g.opts.MaxAttempts:
		outcome = core.OutcomeRetried
		wait := g.opts.Backoff(it.Attempts + 1)
		due := g.now().Add(wait)
		g.tellDelay(sctx, it, err, due, due, false)
		log.Warn("request failed; will retry", "attempt", it.Attempts+1, "in", wait, "err", err)
		g.record(sctx, log, it, "re-queue request", func(c context.Context, lease int64) error {
			return g.store.Retry(c, it.ID, lease, due, err.Error())
		})
	default:
		if !g.giveUp(sctx, it, err, log) {
			outcome = core.OutcomeRetried
		}
	}
	g.obs.Finished(it.Conversation.Channel, it.Kind, outcome)
}

// retryTelling puts back an item whose answer or apology the platform
// failed to take (sendErr, a passing failure), to be sent after the next
// step of Options.Backoff (or the platform's Retry-After, when longer).
// Each try counts as an attempt, so the waits grow to the backoff's
// longest; the attempts no longer decide anything for an item that has
// its answer or has been given up.
func (g *Gateway) retryTelling(ctx context.Context, it core.QueueItem, sendErr error, log *slog.Logger, what string) {
	wait := max(core.RetryAfter(sendErr), g.opts.Backoff(it.Attempts+1))
	log.Warn(what, "attempt", it.Attempts+1, "in", wait, "err", sendErr)
	g.record(ctx, log, it, "re-queue request", func(c context.Context, lease int64) error {
		return g.store.Retry(c, it.ID, lease, g.now().Add(wait), sendErr.Error())
	})
}

// waits says a failure is a provider's passing trouble with a time to
// come back — a rate limit or cooldown, an outage (5xx, unreachable, a
// timeout: the router says when to ask again) —, which the request sits
// out in the queue (see wait) rather than using up its attempts.
func waits(err error) bool {
	return core.Transient(err) && core.RetryAfter(err) > 0
}

// recheckEvery bounds the wait of an item whose provider is cooling
// down (a rate limit, a refused or exhausted credential): the router
// answers such a try at once without calling while the cooldown lasts,
// but lets one call through now and then to see whether the provider is
// back (its probe, whose time its error tells: core.Error.Recheck; the
// item comes back then when it is sooner), and a success ends the
// cooldown. Without the bound a
// waiting message slept through the whole cooldown, minutes after the
// provider was back. An outage's wait is not bounded: each of its tries
// is a call to the failing provider.
const recheckEvery = 15 * time.Second

// wait puts an item back, without counting an attempt, until the
// provider it waits for may answer (the error's RetryAfter, at least the
// first step of Options.Backoff; at most recheckEvery while a cooldown
// lasts). The last try is when queue.max_wait since the message arrived
// ends; a failure then gives it up. The user is told once when the
// answer is delayed by more than a few seconds. It reports the attempt's
// outcome: waiting; or, once max_wait is over, failed, or retried when
// the give-up's apology must be sent again.
func (g *Gateway) wait(ctx context.Context, it core.QueueItem, cause error, log *slog.Logger) core.Outcome {
	g.mu.Lock()
	backs := g.backs // a provider back from now on wakes the item
	g.mu.Unlock()
	now := g.now()
	// expect is when the provider says it may answer; due the next try.
	expect := now.Add(max(core.RetryAfter(cause), g.opts.Backoff(1)))
	due := expect
	cooling := false
	switch core.ErrorKind(cause) {
	case core.KindRateLimited, core.KindAuth, core.KindBilling:
		cooling = true
		// At the router's next probe when that is sooner (its Recheck):
		// a try before it finds out nothing.
		every := recheckEvery
		if rc := core.RecheckAfter(cause); rc > 0 && rc < every {
			every = rc
		}
		if check := now.Add(max(every, g.opts.Backoff(1))); check.Before(due) {
			due = check
		}
	}
	last := false // the provider is not expected back before max_wait ends
	if limit := it.CreatedAt.Add(g.opts.MaxWait); expect.After(limit) {
		if !now.Before(limit) {
			log.Warn("request waited queue.max_wait for the provider; giving up", "queue.max_wait", g.opts.MaxWait, "err", cause)
			if g.giveUp(ctx, it, cause, log) {
				return core.OutcomeFailed
			}
			return core.OutcomeRetried
		}
		expect, last = limit, true
		if due.After(limit) {
			due = limit
		}
	}
	notified := g.tellDelay(ctx, it, cause, expect, due, last)
	log.Warn("the provider failed for now; the request waits", "until", due, "provider_back", expect, "err", cause)
	g.record(ctx, log, it, "defer request", func(c context.Context, lease int64) error {
		return g.store.Defer(c, it.ID, lease, due, cause.Error(), notified)
	})
	if cooling {
		// Woken when a credential is back (ProviderBack). An outage's
		// wait keeps its backoff: a provider failing part of its calls
		// answers some, and waking on each would call it again at once.
		g.mu.Lock()
		back := g.backs != backs
		if !back {
			g.waiting[it.ID] = struct{}{}
		}
		g.mu.Unlock()
		if back {
			// A provider came back while the item was put back (the
			// delay notice, the write): ProviderBack did not see it.
			g.hasten([]int64{it.ID}, "a provider answers again; the message put back meanwhile is due now", "request", it.ID)
		}
	}
	// A command sent while it was being tried is answered now.
	g.claimAsides(context.WithoutCancel(ctx), it.Conversation)
	return core.OutcomeWaiting
}

// waited drops item id from the items waiting for a provider: it runs.
func (g *Gateway) waited(id int64) {
	g.mu.Lock()
	if len(g.waiting) > 0 {
		delete(g.waiting, id)
	}
	g.mu.Unlock()
}

// hastener is the store's Hasten (store.DB): it makes queued items due
// now.
type hastener interface {
	Hasten(ctx context.Context, ids []int64, now time.Time) (int64, error)
}

// ProviderBack wakes the messages this gateway put back to wait for a
// cooling credential (wait): one answers again, so they need not sleep out
// their wait (up to recheckEvery, or the router's next probe). It is the
// router's Options.OnBack. The provider is not told apart: a message
// waiting for another one finds it still cooling, at no call, and waits
// again.
func (g *Gateway) ProviderBack(provider string) {
	g.mu.Lock()
	ids := make([]int64, 0, len(g.waiting))
	for id := range g.waiting {
		ids = append(ids, id)
	}
	clear(g.waiting)
	g.backs++
	g.mu.Unlock()
	slices.Sort(ids) // the order rows are locked in
	g.hasten(ids, "a provider answers again; the messages waiting for one are due now", "provider", provider)
}

// hasten makes the waiting items ids due now and wakes the dispatcher
// (best effort: else they wake at their time); what, with args, says why
// in the log.
func (g *Gateway) hasten(ids []int64, what string, args ...any) {
	h, ok := g.store.(hastener)
	if len(ids) == 0 || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := h.Hasten(ctx, ids, g.now())
	if err != nil {
		g.log.Warn("wake the messages waiting for a provider; they wake at their time", append(args, "err", err)...)
		return
	}
	if n > 0 {
		g.log.Info(what, append(args, "messages", n)...)
		g.poke()
	}
}

// wakeAfter records that the aside command request, once answered, has
// the waiting item head tried again (core.CommandRequest.Wake).
func (g *Gateway) wakeAfter(request, head int64) {
	g.mu.Lock()
	g.wakes[request] = head
	g.mu.Unlock()
}

// wakeWaiting makes the item the aside command request asked to wake
// (wakeAfter) due now, if it still waits for a cooling provider: one
// that waits out an outage's backoff or a platform's flood control keeps
// its time.
func (g *Gateway) wakeWaiting(request int64) {
	g.mu.Lock()
	head, asked := g.wakes[request]
	delete(g.wakes, request)
	_, cooling := g.waiting[head]
	g.mu.Unlock()
	h, ok := g.store.(hastener)
	if !asked || !cooling || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := h.Hasten(ctx, []int64{head}, g.now())
	if err != nil {
		g.log.Warn("wake the waiting message after a command; it wakes at its time", "request", request, "waiting", head, "err", err)
		return
	}
	if n > 0 {
		g.waited(head)
		g.log.Info("the waiting message is tried again at once after a command changed what it waits for", "request", request, "waiting", head)
		g.poke()
	}
}

// tellDelay tells the user of a message, once, that its answer is delayed
// when the failure that has the provider back at due (its next try at
// next) makes it more than quietDelay late since it arrived. Once: not
// when an earlier delay was told (Notified) or already past quietDelay
// (NotBefore, the earlier due). It reports whether it told.
func (g *Gateway) tellDelay(ctx context.Context, it core.QueueItem, cause error, due, next time.Time, last bool) bool {
	if it.Kind != core.EventMessage || it.Message == nil || it.Notified || due.Sub(it.CreatedAt) <= quietDelay ||
		(!it.NotBefore.IsZero() && it.NotBefore.Sub(it.CreatedAt) > quietDelay) {
		return false
	}
	awaitDurable(ctx)
	ch, ok := g.channels[it.Conversation.Channel]
	if !ok {
		return false
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := g.now()
	text := core.DelayMessage(cause, due.Sub(now))
	if rc := core.RecheckAfter(cause); rc > 0 && next.Before(due) {
		// The cooldown may outlast what the provider asked (a ladder of
		// refusals); the router's probe, the next try, comes sooner. A
		// wake of the message before the probe (recheckEvery) calls no
		// provider: the user is told of the probe.
		try := next
		if probe := now.Add(rc); probe.After(try) {
			try = probe
		}
		if try.Before(due) {
			text = core.NextTryMessage(cause, try.Sub(now))
		}
	}
	if last {
		// The provider will not be back before queue.max_wait ends:
		// the answer is not promised.
		text = core.LastTryMessage(cause, due.Sub(g.now()))
	}
	g.sendText(tctx, ch, *it.Message, text)
	return true
}

// giveUp fails an item for good. The user is told first, within a panic
// guard (a panic there cannot make the item run again), and the outcome
// recorded after: a process killed in between leaves the item running,
// so the next start tells the user (at worst twice); recorded first, such
// a kill lost the message's only answer. But when an earlier give-up of
// the item was itself cut short (interruptions past max_attempts: it may
// be the telling that kills the process), the outcome is recorded first,
// so a crash while telling cannot loop on the item. An answer stored by
// an earlier attempt is delivered (its unsent parts) instead of an
// apology. When the platform fails that send for the moment (telling
// them is then all that is left of the message), the item is not failed
// but put back, and the next try tells them (or answers, when it can);
// giveUp then reports false.
func (g *Gateway) giveUp(ctx context.Context, it core.QueueItem, cause error, log *slog.Logger) (failed bool) {
	awaitDurable(ctx)
	log.Error("request failed", "attempts", it.Attempts+1, "interruptions", it.Interruptions, "err", cause)
	fail := func() {
		g.record(ctx, log, it, "mark request failed", func(c context.Context, lease int64) error {
			return g.store.Finish(c, it.ID, lease, core.StatusFailed, cause.Error())
		})
	}
	if it.Interruptions > g.opts.MaxAttempts {
		fail()
		g.tellFailed(ctx, it, cause, log)
	} else {
		if err := g.tellFailed(ctx, it, cause, log); err != nil && core.Passing(err) {
			g.retryTelling(ctx, it, err, log, "the user could not be told that their request failed; they are told later")
			return false
		}
		fail()
	}
	g.emitFailed(it, cause)
	return true
}

// tellFailed tells the sender of a message that failed for good. It
// returns the platform's error when it could not (logged).
func (g *Gateway) tellFailed(ctx context.Context, it core.QueueItem, cause error, log *slog.Logger) (err error) {
	if it.Kind != core.EventMessage || it.Message == nil {
		return nil
	}
	ch, ok := g.channels[it.Conversation.Channel]
	if !ok {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic while telling the user their request failed", "panic", p, "stack", string(debug.Stack()))
			err = nil
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if r, err := g.store.ReplyForRequest(ctx, it.ID, it.Conversation); err == nil && r != nil {
		if r.Streaming {
			// The messages a stream opened show the apology instead.
			r.Parts = ch.Format(core.UserMessage(cause))
		}
		if err := g.deliver(ctx, ch, *it.Message, r, nil, nil); err != nil {
			log.Error("deliver the rest of the stored reply", "err", err)
			return err
		}
		return nil
	}
	if err := send(ctx, ch, *it.Message, core.UserMessage(cause)); err != nil {
		log.Warn("tell the user their request failed", "conv", it.Conversation.String(), "err", err)
		return err
	}
	return nil
}

// recordTries bounds the attempts to write an item's outcome when the
// store fails otherwise than by being out of reach; past them the item
// stays running until its lease runs out and the store hands it out
// again.
const recordTries = 6

// recordWaitMax bounds the wait between two tries to write an outcome to
// a store out of reach: once it answers again the outcome must be
// written before a claim of another replica takes the item, whose lease
// ran out meanwhile, and runs it again.
const recordWaitMax = 500 * time.Millisecond

// reachability is the store's Unreachable (store.DB): whether a failed
// call met a database out of reach for now (refused or dropped
// connections, a server restarting), which comes back by itself.
type reachability interface {
	Unreachable(err error) bool
}

// record writes an item's outcome (write; see Gateway.write). Once it
// returns, written or not, the work no longer holds the item: a claim of
// this process that finds it due again (a retry's or a wait's time, a
// lease that runs out) runs it rather than handing its lease to the work
// (adopt).
func (g *Gateway) record(ctx context.Context, log *slog.Logger, it core.QueueItem, what string, write func(c context.Context, lease int64) error) {
	defer func() {
		if f, _ := ctx.Value(leaseFenceKey{}).(*leaseFence); f != nil {
			f.end()
		}
	}()
	g.write(ctx, log, it, what, write)
}

// write writes for item it (write, under the lease it is given: the
// claim's, or the one a later claim of this process handed over),
// retrying with backoff. A store out of reach is waited for until it
// answers or the gateway stops: the answer may have been sent, and an
// outcome not written would have it sent again; any other failure (a
// disk briefly full, the database busy) is tried recordTries times. A
// lost lease ends it: the item is another claimer's now.
func (g *Gateway) write(ctx context.Context, log *slog.Logger, it core.QueueItem, what string, write func(c context.Context, lease int64) error) {
	// The work's own context ends when the shutdown's grace does; the
	// writes use ctx, which goes on (one under way is not cut short).
	stop := g.stopCtx()
	r, _ := g.store.(reachability)
	var out clock.Repeat
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		lease := leaseOf(ctx, it)
		err := write(ctx, lease)
		if err == nil {
			if failed, since := out.Recovered(); failed {
				log.Info(what+": done, the store answers again", "out_of_reach_for", g.clock.Now().Sub(since).Round(time.Millisecond), "tries", try)
			}
			return
		}
		if errors.Is(err, core.ErrLeaseLost) {
			if leaseOf(ctx, it) == lease {
				// The claim that took the item back may be this process's,
				// its hand-over (adopt) still to come.
				log.Debug(what+": the lease was lost; waiting for this process's claim under way, which may hand it over", "lease", lease)
				g.awaitClaim(stop)
			}
			if leaseOf(ctx, it) != lease {
				// Handed a newer lease meanwhile (adopt): write under it.
				continue
			}
			if f, _ := ctx.Value(leaseFenceKey{}).(*leaseFence); f != nil && !f.lose(lease) {
				continue // handed over just now
			}
			log.Warn(what+": the lease was lost; another claimer answers the request", "err", err)
			return
		}
		unreachable := r != nil && r.Unreachable(err)
		if !unreachable && try >= recordTries {
			log.Error(what+"; the request runs again once its lease runs out (queue.lease_ttl)", "err", err, "tries", try)
			return
		}
		if unreachable {
			if report, since, n := out.Failed(g.clock.Now()); report {
				log.Warn(what+": the store is out of reach; trying until it answers", "failing_since", since, "tries_not_logged", n, "err", err)
			}
			wait = min(wait, recordWaitMax)
		}
		log.Debug(what+"; retrying", "err", err, "in", wait, "try", try)
		if g.clock.Sleep(stop, wait) != nil {
			log.Error(what+"; the gateway stops before it could be written: the request runs again once its lease runs out (queue.lease_ttl)", "err", err, "tries", try)
			return
		}
		wait *= 2
	}
}

// handle runs one item; a panic in a channel, hook or the agent becomes a
// permanent failure of that item instead of a crash of the gateway.
func (g *Gateway) handle(ctx context.Context, it core.QueueItem, log *slog.Logger, release func(), held **core.PartSent) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("panic while processing a request", "panic", p, "stack", string(debug.Stack()))
			err = &core.Error{Kind: core.KindInvalid, Msg: "an internal error occurred (logged)", Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return g.serve(ctx, it, log, release, held)
}
