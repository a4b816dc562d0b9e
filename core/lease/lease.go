package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// DefaultTTL is a lease's time to live when Options.TTL is unset.
const DefaultTTL = 10 * time.Second

// Options configure an Elector.
type Options struct {
	// Holder names this replica in the leases it takes (required).
	Holder string
	// TTL is how long a lease lasts unless renewed (default DefaultTTL).
	TTL time.Duration
	// Poll is how often a candidate that does not hold a lease tries
	// again (default the smaller of 1 s and TTL/3).
	Poll time.Duration
	// Sole says this process is the only one on its database (SQLite):
	// a lease is taken once and never renewed.
	Sole bool
	// OnRenewed, when set, is called after each renewal that kept a
	// lease (metrics, and tests that drive a fake clock).
	OnRenewed func(name string, epoch int64)
	Clock     clock.Clock
	Logger    *slog.Logger
}

// Elector holds leases for one replica.
type Elector struct {
	s   core.LeaseStore
	o   Options
	clk clock.Clock
	log *slog.Logger

	mu   sync.Mutex
	held map[string]int64
}

// New returns an Elector over s.
func New(s core.LeaseStore, o Options) *Elector {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Poll <= 0 {
		o.Poll = min(time.Second, o.TTL/3)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{s: s, o: o, clk: clock.Or(o.Clock), log: o.Logger, held: map[string]int64{}}
}

// Holder is the name this replica holds leases under.
func (e *Elector) Holder() string { return e.o.Holder }

// TTL is the leases' time to live.
func (e *Elector) TTL() time.Duration { return e.o.TTL }

// Held lists the leases this Elector holds now, by name, with their
// epochs.
func (e *Elector) Held() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int64, len(e.held))
	for k, v := range e.held {
		out[k] = v
	}
	return out
}

// HeldNames lists the names of the leases held now, sorted.
func (e *Elector) HeldNames() []string {
	h := e.Held()
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Lease is one term of a held lease, handed to the work.
type Lease struct {
	name   string
	holder string
	epoch  int64
	s      core.LeaseStore
}

// Name is the lease's name.
func (l *Lease) Name() string { return l.name }

// Epoch is the term: bumped whenever the lease changes hands.
func (l *Lease) Epoch() int64 { return l.epoch }

// Data is what the holders of this lease last wrote (nil when nothing).
func (l *Lease) Data(ctx context.Context) ([]byte, error) { return l.s.LeaseData(ctx, l.name) }

// SetData writes the lease's data, fenced by this term: when the lease
// changed hands or ran out it writes nothing and returns
// core.ErrLeaseNotHeld.
func (l *Lease) SetData(ctx context.Context, b []byte) error {
	return l.s.SetLeaseData(ctx, l.name, l.holder, l.epoch, b)
}

// errLost is the cause of a work context cancelled by the lease.
var errLost = errors.New("lease lost")

// Lost says whether err (or a context's cause) is a lease lost under the
// work: a failed renewal, another holder, or the expiry coming.
func Lost(err error) bool { return errors.Is(err, errLost) || errors.Is(err, core.ErrLeaseNotHeld) }

// Hold campaigns for the lease name and runs work while it holds it, until
// ctx ends or work returns nil (see the package doc). It returns ctx's
// error, or nil when work finished.
func (e *Elector) Hold(ctx context.Context, name string, work func(ctx context.Context, l *Lease) error) error {
	if e.o.Holder == "" {
		return fmt.Errorf("lease %s: the elector has no holder name", name)
	}
	for {
		l, start, err := e.campaign(ctx, name)
		if err != nil {
			return err
		}
		e.log.Info("lease taken", "lease", name, "epoch", l.epoch, "holder", e.o.Holder)
		done, err := e.term(ctx, l, start, work)
		if done {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Give another replica the first chance before trying again.
		if err := e.clk.Sleep(ctx, e.o.Poll); err != nil {
			return err
		}
	}
}

// campaign tries to take the lease every Poll until it does or ctx ends.
func (e *Elector) campaign(ctx context.Context, name string) (*Lease, time.Time, error) {
	var unreachable clock.Repeat
	for {
		if err := ctx.Err(); err != nil {
			return nil, time.Time{}, err
		}
		start := e.clk.Now()
		epoch, held, err := e.acquire(ctx, name)
		if err != nil {
			if report, since, n := unreachable.Failed(start); report {
				e.log.Warn("lease: cannot reach the store; trying again", "lease", name, "failing_since", since, "failures_not_logged", n, "err", err)
			}
		} else {
			if failed, since := unreachable.Recovered(); failed {
				e.log.Info("lease: the store answers again", "lease", name, "failed_for", start.Sub(since).Round(time.Second))
			}
			if held {
				return &Lease{name: name, holder: e.o.Holder, epoch: epoch, s: e.s}, start, nil
			}
		}
		if err := e.clk.Sleep(ctx, e.o.Poll); err != nil {
			return nil, time.Time{}, err
		}
	}
}

// acquire is one AcquireLease bounded by TTL/3.
func (e *Elector) acquire(ctx context.Context, name string) (int64, bool, error) {
	actx, cancel := context.WithTimeout(ctx, e.o.TTL/3)
	defer cancel()
	return e.s.AcquireLease(actx, name, e.o.Holder, e.o.TTL)
}

// term runs work under l until it returns, ctx ends or the lease is lost,
// then releases the lease. done says work finished for good (it returned
// nil, or ctx ended).
func (e *Elector) term(ctx context.Context, l *Lease, start time.Time, work func(context.Context, *Lease) error) (done bool, _ error) {
	e.mu.Lock()
	e.held[l.name] = l.epoch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.held[l.name] == l.epoch {
			delete(e.held, l.name)
		}
		e.mu.Unlock()
	}()
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	result := make(chan error, 1)
	go func() { result <- work(wctx, l) }()

	lost := false
	stop := func(why string, err error) {
		if !lost {
			lost = true
			e.log.Warn("lease lost: stopping its work", "lease", l.name, "epoch", l.epoch, "why", why, "err", err)
			cancel(fmt.Errorf("%w: %s", errLost, why))
		}
	}
	if !e.o.Sole {
		ticker := e.clk.NewTicker(e.o.TTL / 3)
		defer ticker.Stop()
		// The fence: the work stops a sixth of the TTL before the lease
		// would run out, unless a renewal begun since succeeded.
		margin := e.o.TTL - e.o.TTL/6
		fenceT := e.clk.NewTimer(margin - e.clk.Now().Sub(start))
		defer fenceT.Stop()
		fence := fenceT.C()
		type renewal struct {
			at    time.Time
			epoch int64
			held  bool
			err   error
		}
		// A renewal runs beside the loop, so a hung store call cannot hold
		// back the fence.
		renewed := make(chan renewal, 1)
		inFlight := false
		// A renewal still under way when the term ends is waited for, so
		// it cannot take the lease again after the release.
		settle := func() {
			if inFlight {
				<-renewed
			}
		}
		for {
			select {
			case err := <-result:
				settle()
				return e.finish(ctx, l, lost, err)
			case <-ctx.Done():
				cancel(nil)
				err := <-result
				settle()
				return e.finish(ctx, l, lost, err)
			case <-fence:
				stop("its expiry is near and no renewal succeeded", nil)
				fence = nil
			case <-ticker.C():
				if lost || inFlight {
					continue
				}
				inFlight = true
				at := e.clk.Now()
				go func() {
					epoch, held, err := e.acquire(ctx, l.name)
					renewed <- renewal{at, epoch, held, err}
				}()
			case r := <-renewed:
				inFlight = false
				switch {
				case lost || ctx.Err() != nil:
				case r.err != nil:
					stop("renewal failed", r.err)
				case !r.held:
					stop("another replica holds it", nil)
				case r.epoch != l.epoch:
					stop("it ran out and was taken again in a new term", nil)
				default:
					fenceT.Reset(margin - e.clk.Now().Sub(r.at))
					if e.o.OnRenewed != nil {
						e.o.OnRenewed(l.name, l.epoch)
					}
				}
			}
		}
	}
	select {
	case err := <-result:
		return e.finish(ctx, l, false, err)
	case <-ctx.Done():
		cancel(nil)
		return e.finish(ctx, l, false, <-result)
	}
}

// finish releases the lease after its work returned err.
func (e *Elector) finish(ctx context.Context, l *Lease, lost bool, err error) (bool, error) {
	if !lost {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.TTL/3)
		if rerr := e.s.ReleaseLease(rctx, l.name, l.holder, l.epoch); rerr != nil {
			e.log.Warn("lease: release failed; it runs out by itself", "lease", l.name, "err", rerr)
		} else {
			e.log.Info("lease released", "lease", l.name, "epoch", l.epoch)
		}
		cancel()
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	if err == nil && !lost {
		return true, nil
	}
	if !lost && !Lost(err) {
		e.log.Error("lease: its work failed; campaigning again", "lease", l.name, "err", err)
	}
	return false, err
}
