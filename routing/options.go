package routing

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
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
	// and routing.max_escalations (default 2; NoEscalation is its 0: a
	// rejection is recorded and the message answered as any other, and
	// /retry answers again with the same model).
	EscalateOnReaction bool
	MaxEscalations     int
	NoEscalation       bool
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
	// Judge is the optional LLM judge of answers (routing.judge).
	Judge Judging
	// SettleZ: a model is settled (no longer sampled) when its acceptance
	// estimate plus SettleZ standard deviations, less its cost, is below
	// the best model's expected utility (default DefaultSettleZ).
	SettleZ float64
	// IncumbentZ: the incumbent (the model the choice rule currently
	// thinks best) stays until another model's mean utility is above it
	// by this many standard deviations of their difference (default
	// DefaultIncumbentZ; negative = 0, no hysteresis).
	IncumbentZ float64
	// NoValueOfInformation turns the value-of-information test off: every
	// model that could still win is sampled (for comparisons).
	NoValueOfInformation bool
	// ChangeShift, DropThreshold and RiseThreshold tune the change
	// detector (0 = DefaultChangeShift, DefaultDropThreshold,
	// DefaultRiseThreshold); NoChangeDetection turns it off (for
	// comparisons in the simulator).
	ChangeShift, DropThreshold, RiseThreshold float64
	NoChangeDetection                         bool
	// NoModelDetection turns off the model-wide drop detector (one model
	// dropping on several task types at once), for comparisons.
	NoModelDetection bool
	// SignalWeights overrides the weight of signal kinds (implicit ones
	// default to MovesOnWeight, ReturnedWeight, ThanksWeight; others 1).
	SignalWeights map[core.SignalKind]float64
	// Seed seeds the choice rule's sampling (0 = from the clock).
	Seed uint64
	// Reload is how often affinity is re-read from the store, to see a
	// reset made by the CLI (default 1 minute; negative = never, for a
	// store nothing else writes).
	Reload time.Duration
	// SharedProfiles is how often the auth profiles' state (cooldowns,
	// failures) is re-read from the store, where other replicas write it,
	// so one replica's 429 cools the credential for all, and the probes'
	// spend today is read from the usage ledger (0 = only at the first
	// call: the store is this router's alone).
	SharedProfiles time.Duration
	// OnBack is called, in a goroutine of its own, when a call succeeds on
	// a credential that had failed (a cooldown, failures in a row), here
	// or on another replica (SharedProfiles): the gateway wakes the
	// messages that wait for a cooling credential instead of letting them
	// sleep out their wait (nil = none). An outage's waits keep their
	// backoff.
	OnBack func(provider string)
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

// New checks o and builds a Router; it does no I/O. Each step sets up
// one part: the catalog and the references into it, the defaults of the
// plain options, the learning parameters, and the in-memory state.
func New(o Options) (*Router, error) {
	if o.Store == nil {
		return nil, fmt.Errorf("routing: Options.Store is required")
	}
	cat, err := checkCatalog(o)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	warnUnpriced(o, cat.byWeight)
	r := &Router{
		o: o, cat: cat, now: o.Now, log: o.Log.With("component", "routing"),
		local: make(chan struct{}, o.MaxLocal), cloud: make(chan struct{}, o.MaxCloud),
		learning: newLearning(o),
		aff:      map[[2]string]core.Affinity{}, pstate: map[string]core.ProfileState{}, timedOut: map[string]string{}, savedAt: map[string]time.Time{}, stepped: map[string]time.Time{}, probedAt: map[string]time.Time{}, trial: map[string]bool{}, refreshed: map[string]bool{}, tryingFixed: map[string]bool{}, failedAt: map[string]time.Time{}, failedKind: map[string]core.Kind{},
		arms: map[[2]string]*armState{}, tasks: map[string]*taskState{}, cooling: map[string]bool{}, budgetTold: map[string]int{},
		rnd: newRand(o.Seed),
	}
	return r, nil
}

// checkCatalog builds the catalog and checks that every provider it
// names is configured and every model reference of the options
// (routing.primary, .fallbacks, .pin, .allowed, channel and chat models)
// resolves in it.
func checkCatalog(o Options) (*catalog, error) {
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
	for _, ref := range o.references() {
		if ref.ref == "" {
			continue
		}
		if _, ok := cat.resolve(ref.ref); !ok {
			return nil, fmt.Errorf("%s: unknown model %q; use a provider/model ref or alias from models.catalog%s", ref.key, ref.ref, suggest(cat.closeMatches(ref.ref)))
		}
	}
	return cat, nil
}

// keyedRef is a model reference and the config key it came from.
type keyedRef struct{ key, ref string }

// references lists every model reference of the options with its config
// key, in a stable order for the first error.
func (o Options) references() []keyedRef {
	out := []keyedRef{{"routing.primary", o.Primary}}
	for i, f := range o.Fallbacks {
		out = append(out, keyedRef{fmt.Sprintf("routing.fallbacks[%d]", i), f})
	}
	for _, t := range slices.Sorted(maps.Keys(o.Pin)) {
		out = append(out, keyedRef{"routing.pin." + t, o.Pin[t]})
	}
	out = append(out, keyedRef{"routing.judge.model", o.Judge.Model})
	for i, ref := range o.Allowed {
		out = append(out, keyedRef{fmt.Sprintf("routing.allowed[%d]", i), ref})
	}
	for _, ch := range slices.Sorted(maps.Keys(o.ChannelModels)) {
		out = append(out, keyedRef{"channels." + ch + ".model", o.ChannelModels[ch]})
	}
	for _, ch := range slices.Sorted(maps.Keys(o.ChatModels)) {
		for _, chat := range slices.Sorted(maps.Keys(o.ChatModels[ch])) {
			out = append(out, keyedRef{fmt.Sprintf("channels.%s.models[%q]", ch, chat), o.ChatModels[ch][chat]})
		}
	}
	return out
}

// withDefaults fills in the plain options left unset: the semaphores,
// the escalation limit, the clock, the logger, the observer and the
// cooldowns.
func (o Options) withDefaults() Options {
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
	if o.Judge.Model != "" && o.Judge.Rate <= 0 {
		o.Judge.Rate = DefaultJudgeRate
	}
	return o
}

// learning is what the choice rule, the change detectors and the probes
// are tuned by, with every default applied.
type learning struct {
	// half is the half-life of evidence (decay_days/2); stale the
	// half-life of the confidence of a pair without new signals.
	half, stale time.Duration
	// lambda is the cost weight λ; capEv the evidence cap.
	lambda, capEv float64
	// settleZ is the confidence a settled model is ruled out with;
	// explore the spread of the sampling.
	settleZ, explore float64
	// incumbentZ is the hysteresis of the incumbent.
	incumbentZ float64
	noVOI      bool
	chg        changeParams
	probe      Probing
}

// newLearning applies the defaults of the learning options.
func newLearning(o Options) learning {
	l := learning{
		half: halfLifeOf(o.DecayDays), stale: staleHalfLifeOf(o.DecayDays),
		lambda: o.CostWeight, capEv: o.EvidenceCap, settleZ: o.SettleZ, explore: o.Explore,
		chg:   changeParams{shift: o.ChangeShift, drop: o.DropThreshold, rise: o.RiseThreshold, guard: DefaultChangeGuard},
		probe: o.Probe.withDefaults(), noVOI: o.NoValueOfInformation,
	}
	switch {
	case l.lambda < 0:
		l.lambda = 0
	case l.lambda == 0:
		l.lambda = DefaultCostWeight
	}
	if o.StaleDays > 0 {
		l.stale = time.Duration(o.StaleDays * float64(24*time.Hour))
	}
	l.settleZ = orDefault(l.settleZ, DefaultSettleZ)
	l.incumbentZ = orDefault(o.IncumbentZ, DefaultIncumbentZ)
	if o.IncumbentZ < 0 {
		l.incumbentZ = 0
	}
	l.explore = orDefault(l.explore, DefaultExplore)
	l.capEv = orDefault(l.capEv, DefaultEvidenceCap)
	l.chg.shift = orDefault(l.chg.shift, DefaultChangeShift)
	l.chg.drop = orDefault(l.chg.drop, DefaultDropThreshold)
	l.chg.rise = orDefault(l.chg.rise, DefaultRiseThreshold)
	return l
}

// orDefault is v, or def when v is not positive.
func orDefault(v, def float64) float64 {
	if v <= 0 {
		return def
	}
	return v
}

// newRand seeds the choice rule's sampling (0 = from the clock).
func newRand(seed uint64) *rand.Rand {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
