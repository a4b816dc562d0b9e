package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Notification is one event as a sink receives it.
type Notification struct {
	core.OpsEvent
	// Suppressed counts the events of this kind held back (duplicates
	// and over the rate limit) since the last one sent.
	Suppressed int
}

// Text is the notification as one line for a chat.
func (n Notification) Text() string {
	s := fmt.Sprintf("⚠️ OpenTalon %s (%s): %s", n.Kind, n.Subject, n.Message)
	if n.Suppressed > 0 {
		s += fmt.Sprintf(" (+%d more of this kind held back)", n.Suppressed)
	}
	return s
}

// Sink sends notifications to one place. Send makes one attempt; the
// Notifier retries an error with backoff unless it is Permanent.
type Sink interface {
	// Name says where it sends, for the log (never a secret).
	Name() string
	Send(ctx context.Context, n Notification) error
}

// permanent marks an error that a retry cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent marks err as not worth retrying (a 4xx answer).
func Permanent(err error) error { return permanent{err} }

// Route is a sink and the event kinds it wants (empty = every kind).
type Route struct {
	Sink   Sink
	Events []string
}

// Options configure a Notifier.
type Options struct {
	Routes []Route
	// Window is how long an event of one kind and subject is not sent
	// again, and the span of MaxPerWindow (default 10 minutes).
	Window time.Duration
	// MaxPerWindow bounds the events of one kind sent per Window
	// (default 5).
	MaxPerWindow int
	// Attempts bounds the tries of one send (default 5); Backoff is the
	// wait before try n+1 (default 1s doubling, at most 1 minute).
	Attempts int
	Backoff  func(n int) time.Duration
	// Buffer is how many notifications wait per sink (default 256);
	// beyond it the newest is dropped and logged.
	Buffer int
	Now    func() time.Time
	Logger *slog.Logger
	// Claim, when set, decides an event for the whole cluster (replicas
	// over one database): the event is sent only when Claim(key, ttl)
	// says this replica is the first to claim key — kind|subject for
	// Window, or the event's Once key for two days. A Claim that fails
	// lets the event through (better twice than never).
	Claim func(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// onceFor is how long an event's Once key is held for the cluster.
const onceFor = 48 * time.Hour

// Notifier implements core.OpsEvents. Lifecycle: New, Start, Close.
type Notifier struct {
	o     Options
	log   *slog.Logger
	sinks []*worker

	mu    sync.Mutex
	last  map[string]time.Time // kind|subject → when last sent
	kinds map[string]*kindState

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type kindState struct {
	start      time.Time
	sent       int
	suppressed int
}

type worker struct {
	route Route
	ch    chan Notification
}

var _ core.OpsEvents = (*Notifier)(nil)

// New builds a Notifier; it sends nothing until Start.
func New(o Options) *Notifier {
	if o.Window <= 0 {
		o.Window = 10 * time.Minute
	}
	if o.MaxPerWindow <= 0 {
		o.MaxPerWindow = 5
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration { return min(time.Second<<min(n-1, 6), time.Minute) }
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{o: o, log: o.Logger.With("component", "notify"), last: map[string]time.Time{}, kinds: map[string]*kindState{}}
	for _, r := range o.Routes {
		n.sinks = append(n.sinks, &worker{route: r, ch: make(chan Notification, o.Buffer)})
	}
	return n
}

// Emit implements core.OpsEvents: the event is dropped when one of its
// kind and subject was sent within the window or its kind reached
// MaxPerWindow (it is counted and reported with the next one sent);
// otherwise it is queued for every sink that wants its kind.
func (n *Notifier) Emit(e core.OpsEvent) {
	if e.At.IsZero() {
		e.At = n.o.Now()
	}
	now := n.o.Now()
	key := e.Kind + "|" + e.Subject
	n.mu.Lock()
	ks := n.kinds[e.Kind]
	if ks == nil || now.Sub(ks.start) >= n.o.Window {
		if ks == nil {
			ks = &kindState{}
			n.kinds[e.Kind] = ks
		}
		ks.start, ks.sent = now, 0
	}
	// An event told once (Once) is deduplicated by its own key, not by
	// its kind and subject.
	if last, ok := n.last[key]; (e.Once == "" && ok && now.Sub(last) < n.o.Window) || ks.sent >= n.o.MaxPerWindow {
		ks.suppressed++
		n.mu.Unlock()
		n.log.Debug("operator event held back (duplicate or rate limit)", "kind", e.Kind, "subject", e.Subject)
		return
	}
	if n.o.Claim != nil {
		// The claims are database writes: Emit's callers (a message
		// failing over, a hook failing) must not wait in line behind
		// another event's while the database is slow. The claim itself
		// is what tells two emitters of one event apart, here as across
		// the cluster, so the lock is not needed around it.
		n.mu.Unlock()
		ckey, ttl := "event|"+key, n.o.Window
		if e.Once != "" {
			ckey, ttl = "once|"+e.Once, onceFor
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		claimed, err := n.o.Claim(ctx, ckey, ttl)
		cancel()
		slot := true
		if err == nil && claimed {
			slot = n.claimSlot(e.Kind, now)
		}
		n.mu.Lock()
		if err != nil {
			n.log.Warn("operator event: the cluster's claim failed; sending it here", "kind", e.Kind, "err", err)
		} else if !claimed {
			n.last[key] = now
			n.mu.Unlock()
			n.log.Debug("operator event sent by another replica", "kind", e.Kind, "subject", e.Subject)
			return
		} else if !slot {
			// The kind's MaxPerWindow is used up across the cluster.
			ks.suppressed++
			n.mu.Unlock()
			n.log.Debug("operator event held back (the cluster's rate limit)", "kind", e.Kind, "subject", e.Subject)
			return
		}
	}
	ks.sent++
	n.last[key] = now
	note := Notification{OpsEvent: e, Suppressed: ks.suppressed}
	ks.suppressed = 0
	if len(n.last) > 1000 {
		for k, t := range n.last {
			if now.Sub(t) >= n.o.Window {
				delete(n.last, k)
			}
		}
	}
	n.mu.Unlock()
	n.log.Info("operator event", "kind", e.Kind, "subject", e.Subject, "message", e.Message)
	for _, w := range n.sinks {
		if len(w.route.Events) > 0 && !subscribed(w.route.Events, e.Kind) {
			continue
		}
		select {
		case w.ch <- note:
		default:
			n.log.Warn("notification sink is behind; event dropped", "sink", w.route.Sink.Name(), "kind", e.Kind)
		}
	}
}

// claimSlot claims one of the MaxPerWindow slots of kind in the current
// window (windows aligned on the clock, so every replica names the same
// ones): the rate limit held for the cluster. A store that fails lets the
// event through.
func (n *Notifier) claimSlot(kind string, now time.Time) bool {
	window := now.Truncate(n.o.Window).UnixMilli()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for slot := range n.o.MaxPerWindow {
		ok, err := n.o.Claim(ctx, fmt.Sprintf("rate|%s|%d|%d", kind, window, slot), n.o.Window)
		if err != nil {
			n.log.Warn("operator event: the cluster's rate limit could not be read; sending it here", "kind", kind, "err", err)
			return true
		}
		if ok {
			return true
		}
	}
	return false
}

// subscribed reports whether a sink's events list takes kind; a list
// naming lua_script_disabled, which is no longer emitted, takes its
// successor lua_hook_failed.
func subscribed(events []string, kind string) bool {
	return slices.Contains(events, kind) || kind == core.EventLuaHookFailed && slices.Contains(events, core.EventLuaScriptDisabled)
}

// Start sends queued notifications until Close.
func (n *Notifier) Start(ctx context.Context) {
	ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, w := range n.sinks {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.run(ctx, w)
		}()
	}
}

func (n *Notifier) run(ctx context.Context, w *worker) {
	for {
		select {
		case <-ctx.Done():
			return
		case note := <-w.ch:
			n.send(ctx, w.route.Sink, note)
		}
	}
}

// send tries one notification up to Attempts times.
func (n *Notifier) send(ctx context.Context, s Sink, note Notification) {
	for try := 1; ; try++ {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := s.Send(sctx, note)
		cancel()
		if err == nil {
			return
		}
		var p permanent
		if errors.As(err, &p) || try >= n.o.Attempts || ctx.Err() != nil {
			n.log.Error("notification not delivered", "sink", s.Name(), "kind", note.Kind, "subject", note.Subject, "tries", try, "err", err)
			return
		}
		wait := n.o.Backoff(try)
		n.log.Warn("notification failed; retrying", "sink", s.Name(), "kind", note.Kind, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Close stops sending; notifications still queued are dropped.
func (n *Notifier) Close() error {
	if n.cancel != nil {
		n.cancel()
		n.wg.Wait()
	}
	return nil
}
