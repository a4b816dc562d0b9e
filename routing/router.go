package routing

import (
	"context"
	"errors"
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
	// Sole says the call is all its queue item does while it runs (the
	// agent loop's call): when it has to wait for its provider's slot,
	// the item only waits, and is told so (core.NoteWaiting). Calls that
	// run beside other work of the item (a tool's post-processing, a
	// hook's, the judge's) leave it unset.
	Sole bool

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
	o     Options
	cat   *catalog
	log   *slog.Logger
	now   func() time.Time
	local chan struct{}
	cloud chan struct{}
	// learning holds the learning parameters (see options.go).
	learning
	randMu sync.Mutex
	rnd    *rand.Rand

	// learnMu orders the recording of signals, so the learning state
	// is written in the order it changed.
	learnMu sync.Mutex

	mu          sync.Mutex
	loaded      bool
	learnLoaded bool
	loadedAt    time.Time
	aff         map[[2]string]core.Affinity
	pstate      map[string]core.ProfileState // by profile id
	// timedOut is, by profile id, the request whose timeout is the
	// profile's latest since its last success (see timeout).
	timedOut map[string]string
	// savedAt is when each healthy profile's use was last persisted.
	savedAt map[string]time.Time
	// stepped is when each profile's cooldown ladder last climbed (see
	// fail).
	stepped map[string]time.Time
	// probedAt is when each cooling profile's probe under way was sent.
	probedAt map[string]time.Time
	// trial holds the profiles that failed since their last success and
	// have a call under way: the one that finds out whether they are
	// back (see nextProfile).
	trial map[string]bool
	// refreshed holds the profiles found cooling down for a refused
	// credential (auth, billing) when this process first read their
	// state: the operator may have fixed the key and restarted, so one
	// call tries each at once (see nextProfile); tryingFixed those whose
	// call is under way (see fail).
	refreshed, tryingFixed map[string]bool
	// failedAt is when each profile's latest failure was recorded: a call
	// started before it that succeeds after it is older news (see
	// succeed).
	failedAt map[string]time.Time
	// failedKind is the kind of each profile's latest failure.
	failedKind map[string]core.Kind
	// profilesAt is when the profiles' state was last read from the
	// store (Options.SharedProfiles).
	profilesAt time.Time
	// calls numbers calls outside a conversation, to tell them apart.
	calls atomic.Uint64
	// arms holds each (task, model)'s learning state beside its
	// affinity, tasks each task type's (see state.go); exploreSpent is
	// the probes' cost on exploreDay (UTC).
	arms         map[[2]string]*armState
	tasks        map[string]*taskState
	exploreDay   time.Time
	exploreSpent float64
	// lastTokens is the size of the last call (with a probe USD cap).
	lastTokens [2]int
	// judging counts the judge's grades in flight; judgeSpent is the
	// judge's cost on judgeDay (UTC), every replica's once the ledger
	// was read (refreshProfiles).
	judging    sync.WaitGroup
	judgeDay   time.Time
	judgeSpent float64
	// cooling says, by provider, that "every credential cooling" was
	// told and no credential has succeeded since; budgetTold is the
	// highest budget level (80, 100) told per budget and UTC day.
	cooling    map[string]bool
	budgetTold map[string]int
	// health holds, by model ref, the models that refused a request or
	// failed with an outage since their last success (see refuse and
	// outage); made on first use.
	health map[string]modelHealth
	// over are the settings admins made in chat (/budget, /allowed), as
	// last read or set here; overGen counts the changes made here, so a
	// read under way does not undo one (see settings.go).
	over    overrides
	overGen uint64
	// lim is what over and the config make of the limits (nil: not
	// worked out since over last changed; see limits).
	lim *limits
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

// load reads affinity, profile state and the settings made in chat from
// the store once, and affinity again every minute (the CLI may reset it
// while we run).
func (r *Router) load(ctx context.Context) {
	r.mu.Lock()
	every := r.o.Reload
	if every == 0 {
		every = time.Minute
	}
	fresh := r.loaded && (every < 0 || r.now().Sub(r.loadedAt) < every)
	first := !r.loaded
	r.mu.Unlock()
	r.refreshProfiles(ctx)
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
		r.mu.Lock()
		r.profilesAt = r.now()
		r.mu.Unlock()
		r.loadSettings(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if first {
		if ls, ok := r.o.Store.(LearningStore); ok && !r.learnLoaded {
			r.loadLearning(ctx, ls)
			r.learnLoaded = true
		}
	}
	if affs != nil || err == nil {
		r.aff = make(map[[2]string]core.Affinity, len(affs))
		for _, a := range affs {
			r.aff[[2]string{a.Task, a.Model}] = a
		}
	}
	for _, p := range ps {
		r.pstate[p.ID] = p
		if k := kindNamed(p.LastError); (k == core.KindAuth || k == core.KindBilling) && p.CooldownUntil.After(r.now()) {
			r.refreshed[p.ID] = true
		}
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
	if err != nil && !d.strict && core.ErrorKind(err) == core.KindContextTooLong && ctx.Err() == nil {
		// No model of the chain takes the prompt: one of the catalog
		// with a larger window than all of them may (issue 25, finding
		// 14), before the orchestrator condenses the history or the user
		// hears the conversation is too long.
		if d2, ok := r.largerWindow(c, d); ok {
			d = d2
			res, err = r.run(ctx, c, d)
		}
	}
	res.TaskType = task
	if res.Model == d.m.Ref {
		res.Exploration = d.explore
	}
	if err == nil {
		r.maybeJudge(ctx, c, res)
	}
	return res, err
}

// errCooledWhileWaiting ends an attempt that waited for its concurrency
// slot while its credential failed: it is not sent (see attempt).
var errCooledWhileWaiting = errors.New("the credential cooled down while the call waited for its turn")

// attempt is one call with one profile on one model, picked at started.
// A call that waited for its concurrency slot (llm.max_concurrent_*)
// while the credential failed and cooled down is not sent: the server
// asked to wait (a 429 while three calls waited behind a local
// provider's one slot sent all three after it).
func (r *Router) attempt(ctx context.Context, c Call, m Model, p Profile, started time.Time, streamed *bool) (*provider.Response, error) {
	sem := r.cloud
	if m.Local {
		sem = r.local
	}
	if err := acquire(ctx, sem, c.Sole); err != nil {
		return nil, err
	}
	defer func() { <-sem }()
	r.mu.Lock()
	at, failed := r.failedAt[p.ID]
	kind := r.failedKind[p.ID]
	// The failure's cooldown is running, or not recorded yet (the call
	// that failed gave its slot back first).
	cool := r.pstate[p.ID].CooldownUntil
	cooled := failed && !at.Before(started) && (cool.After(r.now()) || cool.Before(at))
	r.mu.Unlock()
	if cooled {
		return nil, &core.Error{Kind: kind, Msg: fmt.Sprintf("profile %s: not sent", p.ID), Err: errCooledWhileWaiting, RetryAfter: outageBase}
	}
	prov := r.o.Providers[m.Provider()]
	req := c.Req
	req.Model = m.ModelID()
	req.MaxTokens = m.maxTokens(req.MaxTokens)
	cred := provider.Credentials{APIKey: string(p.Key), OAuth: p.OAuth}
	var resp *provider.Response
	var err error
	if c.OnText == nil {
		resp, err = prov.Complete(ctx, cred, &req)
	} else {
		resp, err = prov.Stream(ctx, cred, &req, func(s string) {
			if s != "" {
				*streamed = true
			}
			c.OnText(s)
		})
	}
	switch k := core.ErrorKind(err); k {
	case core.KindRateLimited, core.KindAuth, core.KindBilling:
		// Known before the slot is given back: a call waiting for it
		// is not sent (fail records the cooldown after).
		r.mu.Lock()
		r.failedAt[p.ID], r.failedKind[p.ID] = r.now(), k
		r.mu.Unlock()
	}
	return resp, err
}

// acquire takes a slot of sem (llm.max_concurrent_*), waiting for one
// while ctx allows. A sole call (Call.Sole) that has to wait tells its
// item's work (core.NoteWaiting), which then only waits: a crash
// meanwhile is not its doing. It is told again once the slot is taken,
// before the call is sent.
func acquire(ctx context.Context, sem chan struct{}, sole bool) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	if sole {
		core.NoteWaiting(ctx, true)
		defer core.NoteWaiting(ctx, false)
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
	if r.probe.DailyUSD > 0 {
		r.noteTokens(u.InputTokens, u.OutputTokens)
	}
	if d := r.deferrable(ctx); d != nil && !r.limits().budgeted() {
		// Stored with the item's reply; a budget (which sums the ledger
		// before each call) has each row written at once.
		d.AddUsage(u)
		return
	}
	if err := r.o.Store.AddUsage(context.WithoutCancel(ctx), u); err != nil {
		r.log.Error("record usage", "model", m.Ref, "err", err)
	}
}
