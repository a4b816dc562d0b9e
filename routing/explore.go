package routing

import (
	"fmt"
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

// Probe sequences. A probe starts a short sequence on its arm: the
// task's next requests keep probing it while its answers look like an
// improvement, and it ends as soon as they do not. The sequence is a
// sequential probability ratio test of "unchanged" (the arm's acceptance
// is its estimate before the sequence, p0) against "improved enough to
// win" (p1: the acceptance at which its utility would equal the
// incumbent's): each weighted signal adds its log-likelihood ratio, the
// sequence ends unchanged below log(SeqAccept0) and reports a rise above
// log(SeqAccept1), or after MaxSeq probes. Most sequences on an unchanged
// arm end after one or two answers; an improved arm is found within
// about a dozen.
const (
	// SeqAccept1 is the likelihood ratio at which a sequence reports a
	// rise (9: about 90% sure the arm improved enough to win).
	SeqAccept1 = 9.0
	// SeqAccept0 ends a sequence as unchanged.
	SeqAccept0 = 0.25
	// seqShift is the least improvement a sequence tests for.
	seqShift = 0.2
	// MaxSeq caps the probes of one sequence.
	MaxSeq = 12
	// changeEvery is how often we assume a model may change, for the
	// value of re-checking it: the chance that an arm changed since its
	// newest evidence is 1 − exp(−age/changeEvery).
	changeEvery = 7 * 24 * time.Hour
)

// probeSeq is an arm's running probe sequence.
type probeSeq struct {
	active bool
	// p0 and p1 are the tested acceptances, llr the log-likelihood ratio
	// so far, pos and neg the signal weights seen, n the probes sent.
	p0, p1, llr, pos, neg float64
	n, seen               int
}

// observe adds one signal of weight w to the sequence; it reports a rise
// (+1), an unchanged arm (−1) or nothing yet (0).
func (q *probeSeq) observe(positive bool, w float64) int {
	q.seen++
	if positive {
		q.llr += w * math.Log(q.p1/q.p0)
		q.pos += w
	} else {
		q.llr += w * math.Log((1-q.p1)/(1-q.p0))
		q.neg += w
	}
	switch {
	case q.llr >= math.Log(SeqAccept1):
		return changeRise
	case q.llr <= math.Log(SeqAccept0):
		return changeDrop
	}
	return changeNone
}

// probeDecision continues a running probe sequence of the task, or
// starts one on the settled arm whose re-check is worth most, if the
// budget allows. Candidates are arms that could win if they improved,
// whose newest evidence or probe is older than StaleAfter (four times
// that for arms dearer than the incumbent); the value of checking one is
// the gain if it became perfect, (1 − λ·rel) − u_incumbent, times the
// chance it changed since, per unit of the lead it loses on the answer
// (cheap arms, stale arms and arms close to the incumbent first). r.mu is
// held.
func (r *Router) probeDecision(task string, cs []armView, g int, now time.Time) (decision, bool) {
	ug := cs[g].u
	for i := range cs {
		st := r.arms[[2]string{task, cs[i].m.Ref}]
		if i == g || st == nil || !st.seq.active {
			continue
		}
		// A sequence ends after MaxSeq probes, after half of them when
		// its answers do not lean toward a rise, when too many of its
		// answers are unjudged (some users never judge; three plus a
		// quarter of the probes may be), or when the task's budget is
		// overdrawn by MaxSeq probes (continuing a sequence may borrow).
		if st.seq.n >= MaxSeq || st.seq.n >= MaxSeq/2 && st.seq.llr <= 0 || st.seq.n-st.seq.seen >= 3+st.seq.n/4 ||
			!r.probeDebt(task, now, cs[i].rel, cs[g].rel, cs[i].m.Ref) {
			st.seq, st.dirty = probeSeq{}, true
			continue
		}
		st.seq.n++
		st.lastProbe, st.dirty = now, true
		return r.probeChoice(task, cs[i], now, "continuing a check"), true
	}
	due, best := -1, 0.0
	for i := range cs {
		c := &cs[i]
		gain := 1 - r.lambda*c.rel - ug
		if !c.settled || gain <= 0 {
			continue
		}
		wait := r.probe.StaleAfter
		if c.rel > cs[g].rel {
			wait *= dearerStale
		}
		age := now.Sub(c.last)
		change := 1 - math.Exp(-float64(age)/float64(changeEvery))
		switch {
		case c.rising:
			// Its own evidence (escalations, earlier probes) leans toward
			// a rise: check it now.
			change = 1
		case age < wait:
			continue
		}
		v := gain * change / max(ug-c.u, 0.01)
		if due < 0 || v > best {
			due, best = i, v
		}
	}
	rel := 0.0
	if due >= 0 {
		rel = cs[due].rel
	}
	model := ""
	if due >= 0 {
		model = cs[due].m.Ref
	}
	if !r.probeToken(task, now, due >= 0, rel, cs[g].rel, model) {
		return decision{}, false
	}
	c := cs[due]
	st := r.arm([2]string{task, c.m.Ref})
	st.lastProbe, st.dirty = now, true
	p0 := clampP(c.full.mean())
	st.seq = probeSeq{active: true, p0: p0, p1: clampP(max(ug+r.lambda*c.rel, p0+seqShift)), n: 1}
	return r.probeChoice(task, c, now, "re-checking"), true
}

func (r *Router) probeChoice(task string, c armView, now time.Time, what string) decision {
	// A model never judged for the task has no newest evidence (its
	// age from the zero time read "2562047h47m0s old").
	newest := "no evidence yet"
	if !c.lastSignal.IsZero() {
		newest = fmt.Sprintf("newest evidence %s old", now.Sub(c.lastSignal).Round(time.Minute))
	}
	return decision{m: c.m, explore: Probed, reason: fmt.Sprintf("%s: %s %s for %s (%.0f%% accepted, %s)",
		ReasonExplore, what, c.m.Ref, task, 100*c.full.mean(), newest)}
}

// probeBudgetAllows checks routing.explore.daily_usd for a probe of
// model: the day's probes so far plus what the last call would have cost
// on the model must stay within it. r.mu is held.
func (r *Router) probeBudgetAllows(now time.Time, model string) bool {
	if r.probe.DailyUSD <= 0 {
		return true
	}
	day := now.UTC().Truncate(24 * time.Hour)
	if !day.Equal(r.exploreDay) {
		r.exploreDay, r.exploreSpent = day, 0
	}
	m, _ := r.cat.resolve(model)
	return r.exploreSpent+m.Cost(r.lastTokens[0], r.lastTokens[1]) <= r.probe.DailyUSD
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
func (r *Router) probeToken(task string, now time.Time, want bool, rel, relBest float64, model string) bool {
	p := r.probe
	relBest = max(relBest, 0.01)
	t := r.task(task)
	b := t.budget
	b.n = min(b.n+p.Rate, p.Burst)
	b.cost = min(b.cost+p.Rate*relBest, p.Burst)
	need := max(rel, relBest)
	ok := want && b.n >= 1 && b.cost >= need && r.probeBudgetAllows(now, model)
	if ok {
		b.n--
		b.cost -= need
	}
	t.budget, t.dirty = b, true
	return ok
}

// probeDebt spends one probe of a running sequence from the task's
// budget, which may be overdrawn by up to MaxSeq probes; it also adds
// the task's share for this learned choice (as probeToken does). r.mu
// is held.
func (r *Router) probeDebt(task string, now time.Time, rel, relBest float64, model string) bool {
	p := r.probe
	relBest = max(relBest, 0.01)
	t := r.task(task)
	b := t.budget
	b.n = min(b.n+p.Rate, p.Burst)
	b.cost = min(b.cost+p.Rate*relBest, p.Burst)
	need := max(rel, relBest)
	ok := b.n-1 >= -MaxSeq && b.cost-need >= -MaxSeq*need && r.probeBudgetAllows(now, model)
	if ok {
		b.n--
		b.cost -= need
	}
	t.budget, t.dirty = b, true
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

// noteTokens keeps the size of the last call, to tell whether a probe
// fits routing.explore.daily_usd.
func (r *Router) noteTokens(in, out int) {
	r.mu.Lock()
	r.lastTokens = [2]int{in, out}
	r.mu.Unlock()
}
