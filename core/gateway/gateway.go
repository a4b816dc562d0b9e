package gateway

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

// Options configure a Gateway.
type Options struct {
	Store core.Store
	Agent core.Agent
	// Hooks and Signals are optional.
	Hooks   core.Hooks
	Signals core.SignalSink
	// Workers bounds how many conversations are processed at once
	// (default 4). 1 makes the queue single-consumer. Delivery of a stored
	// reply does not hold a worker: it waits for the platform's pace
	// outside them.
	Workers int
	// MaxAttempts is how often a request is tried before the user gets an
	// error reply and the request is marked failed (default 3); a request
	// interrupted that often by crashes is given up too.
	MaxAttempts int
	// MaxWait bounds how long a request waits, without counting attempts,
	// while every model and credential is cooling (default 10 minutes).
	MaxWait time.Duration
	// MaxPending caps the unfinished messages of one conversation
	// (default 20; negative = no cap): beyond it a message is not queued
	// and the user is told to wait for the earlier answers.
	MaxPending int
	// RequestTimeout bounds one attempt (default 5 minutes).
	RequestTimeout time.Duration
	// LeaseTTL is how long the store's claim of an item lasts unless
	// renewed (queue.lease_ttl; the store must use the same); the gateway
	// renews the claims it works on every third of it. 0 = the store's
	// claims do not expire, nothing is renewed.
	LeaseTTL time.Duration
	// Backoff gives the wait before attempt n+1 after n failed attempts.
	Backoff func(attempt int) time.Duration
	// ChannelBackoff gives the wait before restarting a channel whose Run
	// failed n times in a row (default 1s doubling to 1 minute).
	ChannelBackoff func(n int) time.Duration
	// Access is each channel's access rule, by channel name; a channel
	// without one is open. Pairings keeps the pairing requests and is
	// required when a channel pairs (AccessPairing); it adds /pair.
	Access   map[string]core.AccessPolicy
	Pairings core.PairingStore
	// Media reads the files messages carry (nil = files are not read, and
	// a message of only files is told so).
	Media core.MediaReader
	// Observer is told about each event's way, for metrics (nil = none).
	Observer core.Observer
	// Clock is what the gateway waits on: the dispatcher's next look at
	// the queue, the retry of an outcome's write, a stream's updates, a
	// channel's restart backoff (nil = the system clock). The shutdown
	// grace of Run is wall time whatever the clock.
	Clock clock.Clock
	// Now reads the time (nil = Clock.Now).
	Now    func() time.Time
	Logger *slog.Logger

	// Firings runs the schedules' own work (nil = prompt firings only).
	Firings core.FiringRunner
	// Events receives the operator events the gateway emits (a request
	// failed for good); nil = none.
	Events core.OpsEvents
	// Authorizer, when set, is asked about every user a channel's access
	// rule admits, on the channels AuthChannels names (empty = every
	// channel but the operator's console).
	Authorizer   core.Authorizer
	AuthChannels []string
	// SharedQueue says other gateways claim from the same store (replicas
	// on one PostgreSQL), whose configs may run channels this one does
	// not: a firing for such a channel is queued for them (their claims
	// keep to their channels) instead of refused.
	SharedQueue bool
}

// Gateway accepts events from channels into the durable queue and
// processes them: strictly in order within a conversation, concurrently
// across conversations. Construct with New, add channels, commands and
// interceptors, then Run.
// The package doc lists its files along the path of an event.
type Gateway struct {
	opts     Options
	store    core.Store
	agent    core.Agent
	log      *slog.Logger
	now      func() time.Time
	clock    clock.Clock
	channels map[string]core.Channel
	commands commandSet
	// interceptors see each message before commands and the agent.
	interceptors []core.Interceptor

	wake chan struct{}
	// pool is the running worker pool (nil before Run).
	pool atomic.Pointer[workers]
	mu   sync.Mutex
	// accepting is false before Run and after shutdown began.
	accepting bool
	// chanState is the supervision state of each channel.
	chanState map[string]*channelState
	// notices is when each conversation or user may next be told a notice
	// (see noticeDue); side tracks such best-effort sends.
	notices map[string]time.Time
	// full holds, by conversation and sender, the refused messages
	// (queue.max_pending) not yet told while a notice to that sender is
	// being sent.
	full map[string]*fullNotices
	// waiting holds the items this gateway put back to wait for a
	// provider (wait), to wake once one is back (ProviderBack).
	waiting map[int64]struct{}
	// flights holds the lease of each item being worked on here
	// (process), by id, for a claim that takes one back to hand over
	// (adopt).
	flights map[int64]*leaseFence
	// claiming is closed once the dispatcher's claim under way, if any,
	// has handed over the leases of the items it took back from work in
	// flight (adopt); nil between claims. A write that finds its lease
	// lost waits for it (awaitClaim): the claim may be this process's.
	claiming chan struct{}
	// backs counts the calls of ProviderBack, so that wait sees one made
	// while it put its item back, before the item was in waiting.
	backs uint64
	// asides holds, by conversation, the end of the last command
	// answered aside (enqueueAside): the next one waits for it, so
	// commands sent together are answered in order.
	asides map[string]chan struct{}
	// wakes holds, by aside command, the waiting item it asked to wake
	// once answered (wakeAfter).
	wakes map[int64]int64
	// asideWait holds, by conversation, those with an aside command that
	// found no free worker (claimAsides): the dispatcher claims their
	// asides again once a worker is free (retryAsides).
	asideWait map[string]core.ConversationKey
	// asideMu makes claimAsides one at a time.
	asideMu sync.Mutex
	side    sync.WaitGroup
	obs     core.Observer
}

// New builds a Gateway; it starts nothing.
func New(o Options) *Gateway {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Minute
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 10 * time.Minute
	}
	if o.MaxPending == 0 {
		o.MaxPending = 20
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration {
			d := 2 * time.Second
			for i := 1; i < n && d < time.Minute; i++ {
				d *= 4
			}
			return min(d, time.Minute)
		}
	}
	if o.ChannelBackoff == nil {
		o.ChannelBackoff = func(n int) time.Duration {
			return min(time.Second<<min(n, 6), time.Minute)
		}
	}
	o.Clock = clock.Or(o.Clock)
	if o.Now == nil {
		o.Now = o.Clock.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	g := &Gateway{
		opts:      o,
		store:     o.Store,
		agent:     o.Agent,
		log:       o.Logger.With("component", "gateway"),
		now:       o.Now,
		clock:     o.Clock,
		channels:  map[string]core.Channel{},
		wake:      make(chan struct{}, 1),
		chanState: map[string]*channelState{},
		notices:   map[string]time.Time{},
		full:      map[string]*fullNotices{},
		waiting:   map[int64]struct{}{},
		flights:   map[int64]*leaseFence{},
		asides:    map[string]chan struct{}{},
		asideWait: map[string]core.ConversationKey{},
		wakes:     map[int64]int64{},
		obs:       o.Observer,
	}
	for _, c := range g.builtinCommands() {
		g.commands.add(c)
	}
	if o.Pairings != nil {
		g.commands.add(core.Command{CommandInfo: core.CommandInfo{Name: "pair", Usage: "/pair [approve|deny CODE | approved]", Description: "List, approve or deny pairing requests (admins)"},
			Run: g.cmdPair, Admin: true})
	}
	return g
}

// AddChannel registers a channel; call before Run.
func (g *Gateway) AddChannel(ch core.Channel) {
	g.channels[ch.Name()] = ch
	g.chanState[ch.Name()] = &channelState{}
}

// Channels returns the registered channels, sorted by name.
func (g *Gateway) Channels() []core.Channel {
	out := make([]core.Channel, 0, len(g.channels))
	for _, ch := range g.channels {
		out = append(out, ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// HasChannel reports whether a channel of that name is registered.
func (g *Gateway) HasChannel(name string) bool {
	_, ok := g.channels[name]
	return ok
}

// AddCommand registers an in-chat command, replacing one of the same
// name; call before Run.
func (g *Gateway) AddCommand(c core.Command) { g.commands.add(c) }

// AddInterceptor registers an Interceptor; call before Run.
func (g *Gateway) AddInterceptor(i core.Interceptor) { g.interceptors = append(g.interceptors, i) }

// Commands implements core.Sink.
func (g *Gateway) Commands() []core.CommandInfo { return g.commands.infos() }

func (g *Gateway) isAccepting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepting
}

func (g *Gateway) setAccepting(v bool) {
	g.mu.Lock()
	g.accepting = v
	g.mu.Unlock()
}

// noObserver is the Observer of a gateway built without one.
type noObserver struct{}

func (noObserver) Accepted(string)                               {}
func (noObserver) Stage(string, core.Stage, time.Duration)       {}
func (noObserver) Finished(string, core.EventKind, core.Outcome) {}
func (noObserver) HookFailed(string, core.Stage)                 {}
