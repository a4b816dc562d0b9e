package routing

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

// Options configure a Router. Providers, Catalog and Store are required.
type Options struct {
	// Providers by provider id (models.providers.<id>).
	Providers map[string]provider.Provider
	// Catalog is every model the router may use (models.catalog, with cost
	// and context window filled in from the provider's models list).
	Catalog []Model
	// Primary answers when nothing else decides (routing.primary; default
	// the highest weight). Fallbacks are stage-2 failover (routing.fallbacks).
	Primary   string
	Fallbacks []string
	// Pin maps a task type to a model (routing.pin).
	Pin map[string]string
	// Allowed restricts /model pins (routing.allowed; empty = any).
	Allowed []string
	// ChatModels maps channel → chat id → model (channels.<x>.models) and
	// ChannelModels channel → model (channels.<x>.model).
	ChatModels    map[string]map[string]string
	ChannelModels map[string]string
	// NoAffinity turns learning off (routing.affinity.enabled: false);
	// DecayDays is routing.affinity.decay_days (default 30).
	NoAffinity bool
	DecayDays  float64
	// EscalateOnReaction and MaxEscalations: routing.escalate_on_reaction
	// and routing.max_escalations (default 2).
	EscalateOnReaction bool
	MaxEscalations     int
	// DailyUSD and ChatDailyUSD are routing.budget (0 = no budget).
	DailyUSD, ChatDailyUSD float64
	// Profiles are the credentials per provider id (auth.profiles_file or
	// models.providers.<id>.api_key as "<id>:default"). A provider with no
	// profile is called without a key (a local server).
	Profiles map[string][]Profile
	// AuthOrder is auth.order: provider id → profile ids.
	AuthOrder map[string][]string
	Cooldowns Cooldowns
	// MaxLocal and MaxCloud bound concurrent LLM calls (llm.*; 1 and 4).
	MaxLocal, MaxCloud int
	// Classifier tunes the task heuristics.
	Classifier Classifier
	// CostWeight is λ in the choice rule, utility = acceptance − λ ×
	// relative price (routing.cost_weight; 0 = DefaultCostWeight, a
	// negative value = 0: cost is ignored). EvidenceCap is the cap on
	// decayed evidence per (task, model) (default 30).
	CostWeight  float64
	EvidenceCap float64
	// Explore scales the posterior's spread when sampling (default 1;
	// smaller explores less). StaleDays is the half-life of the confidence
	// of a (task, model) pair without new signals (default decay_days/10).
	Explore   float64
	StaleDays float64
	// Probe is the re-exploration budget (routing.explore).
	Probe Probing
	// SettleZ: a model is settled (no longer sampled) when its acceptance
	// estimate plus SettleZ standard deviations, less its cost, is below
	// the best model's expected utility (default DefaultSettleZ).
	SettleZ float64
	// ChangeShift, DropThreshold and RiseThreshold tune the change
	// detector (0 = DefaultChangeShift, DefaultDropThreshold,
	// DefaultRiseThreshold); NoChangeDetection turns it off (for
	// comparisons in the simulator).
	ChangeShift, DropThreshold, RiseThreshold float64
	NoChangeDetection                         bool
	// SignalWeights overrides the weight of signal kinds (implicit ones
	// default to MovesOnWeight, ReturnedWeight, ThanksWeight; others 1).
	SignalWeights map[core.SignalKind]float64
	// Seed seeds the choice rule's sampling (0 = from the clock).
	Seed uint64
	// Reload is how often affinity is re-read from the store, to see a
	// reset made by the CLI (default 1 minute; negative = never, for a
	// store nothing else writes).
	Reload time.Duration
	Store  Store
	// Observer is told of each LLM call attempt and failover, for metrics
	// (nil = none).
	Observer Observer
	Now      func() time.Time
	Log      *slog.Logger
	// Events is told when every credential of a provider is cooling and
	// when a daily budget reaches 80% and 100% (nil = nobody).
	Events core.OpsEvents
}

// Observer is told what the router does, for metrics. Its methods are
// called on the caller's goroutine and must return at once.
type Observer interface {
	// LLMCall is one attempt of a call: the model reference, its
	// provider, the outcome ("ok", or the failure's kind such as
	// "rate_limited") and how long it took.
	LLMCall(model, provider, outcome string, d time.Duration)
	// Failover is a move after a failed attempt on model from to the
	// next attempt on model to (the same model with another credential,
	// or the next model of the chain).
	Failover(from, to string)
}

type noObserver struct{}

func (noObserver) LLMCall(string, string, string, time.Duration) {}
func (noObserver) Failover(string, string)                       {}

// Call is one LLM call to route.
type Call struct {
	// Purpose is "chat", "plugin", "post_process", "lua" or "compaction".
	Purpose string
	// Session is nil outside a conversation.
	Session      *core.Session
	Conversation core.ConversationKey
	UserID       string
	// Model is an explicit ref or alias for this call ("" = route).
	Model string
	// Exclude lists refs that must not answer (escalation); the last one
	// is the model whose answer was rejected.
	Exclude []string
	// TaskType "" = classify Req.Messages.
	TaskType string
	// Req is the request; its Model is filled in by the router.
	Req provider.Request
	// Needs are the capabilities the answering model must have (CapVision
	// for a message with an image): only such models are chosen, a pin
	// or per-request model without them included.
	Needs []string
	// OnText, when set, streams the answer's text deltas.
	OnText func(string)
	// Choice, when set, is a decision Choose made for this call: Chat
	// uses it instead of deciding again, so the request fits the model
	// it was shaped for.
	Choice *Choice

	// probe is the model a probe asked for: its answer is recorded in
	// the ledger with purpose "explore".
	probe string
}

// Result is a routed answer.
type Result struct {
	*provider.Response
	// Model is the provider/model ref that answered.
	Model    string
	TaskType string
	// Reason says which rule chose the model.
	Reason string
	// Profile is the auth profile that answered ("" = none).
	Profile string
	// Exploration says whether the learned choice explored.
	Exploration Exploration
}

// Router chooses models, fails over and keeps the ledger. Safe for
// concurrent use.
type Router struct {
	o       Options
	cat     *catalog
	log     *slog.Logger
	now     func() time.Time
	local   chan struct{}
	cloud   chan struct{}
	half    time.Duration
	stale   time.Duration
	lambda  float64
	capEv   float64
	settleZ float64
	chg     changeParams
	probe   Probing
	randMu  sync.Mutex
	rnd     *rand.Rand

	mu       sync.Mutex
	loaded   bool
	loadedAt time.Time
	aff      map[[2]string]core.Affinity
	pstate   map[string]core.ProfileState // by profile id
	// timedOut is, by profile id, the request whose timeout is the
	// profile's latest since its last success (see timeout).
	timedOut map[string]string
	// savedAt is when each healthy profile's use was last persisted.
	savedAt map[string]time.Time
	// calls numbers calls outside a conversation, to tell them apart.
	calls atomic.Uint64
	// arms holds each (task, model)'s change detector and last probe;
	// tokens the probe budget per task type; exploreSpent the probes'
	// cost on exploreDay (UTC).
	arms         map[[2]string]*armState
	tokens       map[string]probeBudget
	exploreDay   time.Time
	exploreSpent float64
	// cooling says, by provider, that "every credential cooling" was
	// told and no credential has succeeded since; budgetTold is the
	// highest budget level (80, 100) told per budget and UTC day.
	cooling    map[string]bool
	budgetTold map[string]int
	// health holds, by model ref, the models that refused a request or
	// failed with an outage since their last success (see refuse and
	// outage); made on first use.
	health map[string]modelHealth
}

// New checks o and builds a Router; it does no I/O.
func New(o Options) (*Router, error) {
	if o.Store == nil {
		return nil, fmt.Errorf("routing: Options.Store is required")
	}
	if len(o.Catalog) == 0 {
		return nil, fmt.Errorf("routing: no models: add at least one entry under models.catalog (provider/model: {weight: 50})")
	}
	cat, err := newCatalog(o.Catalog)
	if err != nil {
		return nil, err
	}
	for _, m := range cat.byWeight {
		if _, ok := o.Providers[m.Provider()]; !ok {
			return nil, fmt.Errorf("models.catalog.%s: provider %q is not configured; add it under models.providers", m.Ref, m.Provider())
		}
	}
	check := func(key, ref string) error {
		if ref == "" {
			return nil
		}
		if _, ok := cat.resolve(ref); !ok {
			return fmt.Errorf("%s: unknown model %q; use a provider/model ref or alias from models.catalog%s", key, ref, suggest(cat.closeMatches(ref)))
		}
		return nil
	}
	if err := check("routing.primary", o.Primary); err != nil {
		return nil, err
	}
	for i, f := range o.Fallbacks {
		if err := check(fmt.Sprintf("routing.fallbacks[%d]", i), f); err != nil {
			return nil, err
		}
	}
	for t, ref := range o.Pin {
		if err := check("routing.pin."+t, ref); err != nil {
			return nil, err
		}
	}
	for i, ref := range o.Allowed {
		if err := check(fmt.Sprintf("routing.allowed[%d]", i), ref); err != nil {
			return nil, err
		}
	}
	for ch, ref := range o.ChannelModels {
		if err := check("channels."+ch+".model", ref); err != nil {
			return nil, err
		}
	}
	for ch, m := range o.ChatModels {
		for chat, ref := range m {
			if err := check(fmt.Sprintf("channels.%s.models[%q]", ch, chat), ref); err != nil {
				return nil, err
			}
		}
	}
	if o.MaxLocal <= 0 {
		o.MaxLocal = 1
	}
	if o.MaxCloud <= 0 {
		o.MaxCloud = 4
	}
	if o.MaxEscalations <= 0 {
		o.MaxEscalations = 2
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	o.Cooldowns = o.Cooldowns.withDefaults()
	warnUnpriced(o, cat.byWeight)
	r := &Router{
		o: o, cat: cat, now: o.Now, log: o.Log.With("component", "routing"),
		local: make(chan struct{}, o.MaxLocal), cloud: make(chan struct{}, o.MaxCloud),
		half: halfLifeOf(o.DecayDays), stale: staleHalfLifeOf(o.DecayDays), lambda: o.CostWeight, capEv: o.EvidenceCap,
		aff: map[[2]string]core.Affinity{}, pstate: map[string]core.ProfileState{}, timedOut: map[string]string{}, savedAt: map[string]time.Time{},
		arms: map[[2]string]*armState{}, tokens: map[string]probeBudget{}, cooling: map[string]bool{}, budgetTold: map[string]int{},
		settleZ: o.SettleZ, chg: changeParams{shift: o.ChangeShift, drop: o.DropThreshold, rise: o.RiseThreshold, guard: DefaultChangeGuard}, probe: o.Probe.withDefaults(),
	}
	switch {
	case r.lambda < 0:
		r.lambda = 0
	case r.lambda == 0:
		r.lambda = DefaultCostWeight
	}
	if r.settleZ <= 0 {
		r.settleZ = DefaultSettleZ
	}
	if r.chg.shift <= 0 {
		r.chg.shift = DefaultChangeShift
	}
	if r.chg.drop <= 0 {
		r.chg.drop = DefaultDropThreshold
	}
	if r.chg.rise <= 0 {
		r.chg.rise = DefaultRiseThreshold
	}
	if o.StaleDays > 0 {
		r.stale = time.Duration(o.StaleDays * float64(24*time.Hour))
	}
	if r.o.Explore <= 0 {
		r.o.Explore = DefaultExplore
	}
	if r.capEv <= 0 {
		r.capEv = DefaultEvidenceCap
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return r, nil
}

func suggest(ms []string) string {
	if len(ms) == 0 {
		return ""
	}
	s := " (did you mean "
	for i, m := range ms {
		if i > 0 {
			s += ", "
		}
		s += m
	}
	return s + "?)"
}

// Models returns the catalog, highest weight first.
func (r *Router) Models() []Model { return append([]Model(nil), r.cat.byWeight...) }

// Resolve turns a ref or alias into a catalog model.
func (r *Router) Resolve(name string) (Model, bool) { return r.cat.resolve(name) }

// Can says whether some catalog model has capability c.
func (r *Router) Can(c string) bool {
	for _, m := range r.cat.byWeight {
		if m.Can(c) {
			return true
		}
	}
	return false
}

// ContextWindow returns a model's context window (0 = unknown).
func (r *Router) ContextWindow(ref string) int {
	m, _ := r.cat.resolve(ref)
	return m.ContextWindow
}

// load reads affinity and profile state from the store once, and
// affinity again every minute (the CLI may reset it while we run).
func (r *Router) load(ctx context.Context) {
	r.mu.Lock()
	every := r.o.Reload
	if every == 0 {
		every = time.Minute
	}
	fresh := r.loaded && (every < 0 || r.now().Sub(r.loadedAt) < every)
	first := !r.loaded
	r.mu.Unlock()
	if fresh {
		return
	}
	affs, err := r.o.Store.Affinities(ctx)
	if err != nil {
		r.log.Warn("load affinity", "err", err)
	}
	var ps []core.ProfileState
	if first {
		if ps, err = r.o.Store.ProfileStates(ctx); err != nil {
			r.log.Warn("load profile state", "err", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if affs != nil || err == nil {
		r.aff = make(map[[2]string]core.Affinity, len(affs))
		for _, a := range affs {
			r.aff[[2]string{a.Task, a.Model}] = a
		}
	}
	for _, p := range ps {
		r.pstate[p.ID] = p
	}
	r.loaded, r.loadedAt = true, r.now()
}

// Chat routes and makes one LLM call: it classifies, chooses a model,
// passes the semaphore, rotates profiles and falls back across models as
// errors demand, and records the call in the cost ledger.
func (r *Router) Chat(ctx context.Context, c Call) (Result, error) {
	var d decision
	var task string
	if c.Choice != nil {
		d, task = c.Choice.d, c.Choice.TaskType
	} else {
		ch, err := r.Choose(ctx, c)
		if err != nil {
			return Result{TaskType: ch.TaskType}, err
		}
		d, task = ch.d, ch.TaskType
	}
	if d.explore == Probed {
		c.probe = d.m.Ref
	}
	res, err := r.run(ctx, c, d)
	if err != nil && !d.strict && core.ErrorKind(err) == core.KindBadRequest && ctx.Err() == nil {
		// Every model of the chain refused the request: they are avoided
		// now, so a new choice takes another model when there is one.
		if d2, err2 := r.decide(ctx, c, task, true); err2 == nil && !slices.ContainsFunc(d.chain, func(m Model) bool { return m.Ref == d2.m.Ref }) {
			d = d2
			res, err = r.run(ctx, c, d)
		}
	}
	res.TaskType = task
	if res.Model == d.m.Ref {
		res.Exploration = d.explore
	}
	return res, err
}

// attempt is one call with one profile on one model.
func (r *Router) attempt(ctx context.Context, c Call, m Model, p Profile, streamed *bool) (*provider.Response, error) {
	sem := r.cloud
	if m.Local {
		sem = r.local
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-sem }()
	prov := r.o.Providers[m.Provider()]
	req := c.Req
	req.Model = m.ModelID()
	req.MaxTokens = m.maxTokens(req.MaxTokens)
	cred := provider.Credentials{APIKey: string(p.Key), OAuth: p.OAuth}
	if c.OnText == nil {
		return prov.Complete(ctx, cred, &req)
	}
	return prov.Stream(ctx, cred, &req, func(s string) {
		if s != "" {
			*streamed = true
		}
		c.OnText(s)
	})
}

// ledger records a successful call's usage and cost.
func (r *Router) ledger(ctx context.Context, c Call, m Model, resp *provider.Response) {
	resp.Usage.CostUSD = m.Cost(resp.Usage.InputTokens, resp.Usage.OutputTokens)
	u := core.UsageRecord{
		At: r.now(), Conversation: c.Conversation.String(), UserID: c.UserID, Model: m.Ref,
		Purpose: c.Purpose, InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, CostUSD: resp.Usage.CostUSD,
	}
	if c.Conversation == (core.ConversationKey{}) {
		u.Conversation = ""
		if c.Session != nil {
			u.Conversation = c.Session.Conversation.String()
		}
	}
	if c.Session != nil {
		u.SessionID = c.Session.ID
	}
	if u.Purpose == "" {
		u.Purpose = "chat"
	}
	if c.probe == m.Ref {
		u.Purpose = PurposeExplore
		r.addExploreSpend(u.At, u.CostUSD)
	}
	if d := r.deferrable(ctx); d != nil && r.o.DailyUSD <= 0 && r.o.ChatDailyUSD <= 0 {
		// Stored with the item's reply; a budget (which sums the ledger
		// before each call) has each row written at once.
		d.AddUsage(u)
		return
	}
	if err := r.o.Store.AddUsage(context.WithoutCancel(ctx), u); err != nil {
		r.log.Error("record usage", "model", m.Ref, "err", err)
	}
}
