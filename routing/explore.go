package routing

import (
	"math"
	"time"
)

// Re-exploration. Once the router has learned a task type, a model
// whose acceptance is confidently below the current best by more than
// its cost advantage is *settled*: it is no longer sampled. A settled
// model is re-checked by a *probe* — one real answer, recorded in the
// ledger with purpose "explore" — once its newest evidence for the task
// is older than Probing.StaleAfter (four times that for models dearer
// than the current best: an improvement of a cheaper model is worth
// most), and again at once while its change detector leans toward a
// rise. Probes are budgeted per task type (a share of its learned
// choices, with a small burst) and per UTC day in USD; they never
// answer a strict choice (a per-request model, a /model pin, a chat or
// channel model, routing.pin) nor an escalation, because those never
// reach the learned choice.

// Probing is the budget of re-exploration (routing.explore).
type Probing struct {
	// Off disables probes (routing.explore.rate: 0).
	Off bool
	// Rate is the largest share of a task type's learned choices that
	// may be probes (default DefaultProbeRate).
	Rate float64
	// Burst is how many probes may follow one another when the budget
	// has been saved up (default DefaultProbeBurst).
	Burst float64
	// DailyUSD caps the cost of probes per UTC day (0 = no cap).
	DailyUSD float64
	// StaleAfter is the age of a settled model's newest evidence from
	// which it is probed again (default DefaultStaleAfter).
	StaleAfter time.Duration
}

// Defaults of re-exploration, chosen in the route simulator.
const (
	DefaultProbeRate  = 0.03
	DefaultProbeBurst = 3
	DefaultStaleAfter = 12 * time.Hour
	// dearerStale multiplies StaleAfter for models dearer than the
	// current best.
	dearerStale = 4
	// DefaultSettleZ: a model is settled when its acceptance estimate
	// plus this many standard deviations, less its cost, is below the
	// best model's expected utility.
	DefaultSettleZ = 2.0
	// minSettleEvidence: a model with less decayed evidence than this is
	// never settled (its estimate is too uncertain to rule it out).
	minSettleEvidence = 10
)

func (p Probing) withDefaults() Probing {
	if p.Rate <= 0 {
		p.Rate = DefaultProbeRate
	}
	if p.Burst <= 0 {
		p.Burst = DefaultProbeBurst
	}
	if p.StaleAfter <= 0 {
		p.StaleAfter = DefaultStaleAfter
	}
	return p
}

// Exploration says whether a routed call explored.
type Exploration int

// Kinds of exploration.
const (
	// NotExploring: the model the router currently thinks best, or a
	// choice that did not come from learning.
	NotExploring Exploration = iota
	// Sampled: Thompson sampling drew a model other than the current
	// best among the models not yet settled.
	Sampled
	// Probed: a budgeted probe of a settled model (purpose "explore").
	Probed
)

// PurposeExplore is the ledger purpose of a probe.
const PurposeExplore = "explore"

// armState is the in-memory learning state of one (task type, model)
// beside its affinity row: the change detector and the last probe. It is
// not persisted: after a restart the detectors start afresh and settle
// within a few signals.
type armState struct {
	det       changeDetector
	lastProbe time.Time
	// settledVs is the best model this one was settled against, at
	// settledAt ("" = not settled).
	settledVs string
	settledAt time.Time
}

// arm returns the state of (task, model), creating it; r.mu is held.
func (r *Router) arm(k [2]string) *armState {
	st := r.arms[k]
	if st == nil {
		st = &armState{}
		r.arms[k] = st
	}
	return st
}

// upper is the optimistic acceptance estimate: mean + z standard
// deviations.
func (p posterior) upper(z float64) float64 {
	n := p.alpha + p.beta
	m := p.mean()
	return min(m+z*math.Sqrt(m*(1-m)/(n+1)), 1)
}

// probeBudget is one task type's saved-up probe budget: a count and a
// cost (in units of the most expensive model's price).
type probeBudget struct{ n, cost float64 }

// probeToken adds the task's share of budget for one learned choice and
// spends one probe of a model of relative price rel from it, if the
// budget allows (want: a model is due). Each learned choice adds Rate
// probes and Rate × the best model's relative price; a probe takes one
// probe and the greater of its model's and the best model's relative
// price. So probes are at most Rate of the choices, and cost at most
// Rate of what the choices cost: a model 40 times dearer than the best
// is probed 40 times more rarely. r.mu is held.
func (r *Router) probeToken(task string, now time.Time, want bool, rel, relBest float64) bool {
	p := r.probe
	relBest = max(relBest, 0.01)
	b := r.tokens[task]
	b.n = min(b.n+p.Rate, p.Burst)
	b.cost = min(b.cost+p.Rate*relBest, p.Burst)
	need := max(rel, relBest)
	ok := want && b.n >= 1 && b.cost >= need
	if ok && p.DailyUSD > 0 {
		day := now.UTC().Truncate(24 * time.Hour)
		if !day.Equal(r.exploreDay) {
			r.exploreDay, r.exploreSpent = day, 0
		}
		ok = r.exploreSpent < p.DailyUSD
	}
	if ok {
		b.n--
		b.cost -= need
	}
	r.tokens[task] = b
	return ok
}

// addExploreSpend counts a probe's cost against routing.explore.daily_usd.
func (r *Router) addExploreSpend(at time.Time, usd float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	day := at.UTC().Truncate(24 * time.Hour)
	if !day.Equal(r.exploreDay) {
		r.exploreDay, r.exploreSpent = day, 0
	}
	r.exploreSpent += usd
}
