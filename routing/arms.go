package routing

import (
	"math"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Priors, the incumbent and the stop rule of the choice rule (see
// docs/routing.md, "The choice rule").
//
// Each (task type, model) pair is an arm. Before any evidence an arm's
// acceptance is its prior, taken from the catalog weight: the operator's
// weight says how good they expect the model to be and how sure they
// are, so a heavily weighted model starts with a high and confident
// estimate and a model of weight 0 with a vague one. Prices enter the
// utility (acceptance − λ · relative price), so a heavily weighted cheap
// model is the confident incumbent from the first request and a dear
// model must look plausibly better by more than its price before it is
// tried at all.

// Prior of an arm from the catalog weight w (0..100):
//
//	mean     = PriorMeanAt0 + (PriorMeanAt100 − PriorMeanAt0) · w/100
//	strength = PriorStrengthAt0 + (PriorStrengthAt100 − PriorStrengthAt0) · w/100
//
// strength is in units of evidence (one explicit signal weighs 1).
const (
	PriorMeanAt0       = 0.5
	PriorMeanAt100     = 0.9
	PriorStrengthAt0   = 2.0
	PriorStrengthAt100 = 10.0
)

// DefaultIncumbentZ is the hysteresis of the incumbent (see incumbentOf).
const DefaultIncumbentZ = 1.0

// prior is an arm's prior acceptance and its weight in units of evidence.
type prior struct{ mean, strength float64 }

// priorOf derives a model's prior from its catalog weight.
func priorOf(m Model) prior {
	w := min(max(float64(m.Weight), 0), 100) / 100
	return prior{mean: PriorMeanAt0 + (PriorMeanAt100-PriorMeanAt0)*w, strength: PriorStrengthAt0 + (PriorStrengthAt100-PriorStrengthAt0)*w}
}

// posteriorOf is the acceptance posterior of an arm from its prior and
// its affinity row (already decayed to now). stale > 0 also fades the
// confidence of the evidence with the time since the arm's last signal
// (half-life stale): the estimate stays, but a model nobody has tried for
// a while is sampled more widely.
func posteriorOf(p prior, a core.Affinity, now time.Time, stale time.Duration) posterior {
	f := 1.0
	if stale > 0 && !a.LastSignal.IsZero() {
		f = decayFactor(now.Sub(a.LastSignal), stale)
	}
	return posterior{alpha: p.strength*p.mean + f*a.Pos, beta: p.strength*(1-p.mean) + f*a.Neg}
}

// sd is the posterior's standard deviation, made conservative near 0 and
// 1: the spread is taken at a mean of at most 0.9 (at least 0.1), where
// the normal approximation of a skewed Beta would understate its tail.
func (p posterior) sd() float64 {
	m := min(max(p.mean(), 0.1), 0.9)
	return math.Sqrt(m * (1 - m) / (p.alpha + p.beta + 1))
}

// DefaultStopZ is the confidence of the stop rule: an arm is no longer
// explored when the chance that its utility beats the incumbent's is
// below about 2.3% (one-sided, 2 standard deviations).
const DefaultStopZ = 2.0

// couldWin is the stop rule: whether an arm (posterior c, relative price
// relC) could still beat the incumbent (g, relG) at confidence z. It
// could not when even always accepted it would be below the incumbent's
// pessimistic utility, or when the difference of the utilities is below
// zero by more than z standard deviations of the difference. Both sides'
// uncertainty counts: an arm is never ruled out against an incumbent that
// is itself unsure. A posterior of little evidence is skewed where the
// normal approximation is not, so its spread counts z·(1 + 1/n) times (n
// its prior strength plus evidence); TestStopRuleNeverStopsAnArmThatCould
// StillWin checks the rule against the exact posteriors.
func couldWin(c, g posterior, relC, relG, lambda, z float64) bool {
	sc := c.sd() * z * (1 + 1/(c.alpha+c.beta))
	sg := g.sd() * z * (1 + 1/(g.alpha+g.beta))
	ug := g.mean() - lambda*relG
	if 1-lambda*relC < ug-sg {
		return false
	}
	uc := c.mean() - lambda*relC
	return uc-ug+math.Hypot(sc, sg) >= 0
}

// psi is E[(X − z)⁺] for a standard normal X: φ(z) − z·Q(z).
func psi(z float64) float64 {
	return math.Exp(-z*z/2)/math.Sqrt(2*math.Pi) - z*0.5*math.Erfc(z/math.Sqrt2)
}

// worthExploring is the value-of-information test of an arm that could
// still win: whether one more answer by it is expected to improve the
// router's choice for the task's next h requests by more than that
// answer is expected to lose. One answer moves the arm's estimate by
// about σ̃ = σ² / √(σ² + p(1 − p)); the choice improves when the arm's
// estimate ends above the incumbent's, by E[(u_c' − u_g)⁺] = σ̃ · ψ(lead/σ̃)
// per request (the knowledge gradient); the answer loses the incumbent's
// lead in expected utility. An arm whose mean utility is not below the
// incumbent's is always worth exploring.
func worthExploring(c, g posterior, relC, relG, lambda, h float64) bool {
	lead := (g.mean() - lambda*relG) - (c.mean() - lambda*relC)
	if lead <= 0 {
		return true
	}
	sd := c.sd()
	m := min(max(c.mean(), 0.1), 0.9)
	step := sd * sd / math.Sqrt(sd*sd+m*(1-m))
	return h*step*psi(lead/step) >= lead
}

// armView is one arm's standing at a moment, as the choice rule sees it.
type armView struct {
	m Model
	// full is the posterior; faded also fades the confidence of evidence
	// that is getting old (for sampling only).
	full, faded posterior
	// rel is the relative price, u the mean utility.
	rel, u float64
	// evidence is the decayed evidence behind the estimate (no prior).
	evidence float64
	// last is when the arm was last checked (its newest probe or
	// detected change, else its newest evidence); lastSignal its newest
	// evidence.
	last, lastSignal time.Time
	// rising: the arm's rise detector leans toward a rise.
	rising bool
	// settled: the arm is not sampled (see settle); stopped: it cannot
	// win at all.
	settled, stopped bool
}

// viewTask builds the view of every arm of task not excluded, appending
// to buf; total is the decayed evidence of the task over them. r.mu is
// held.
func (r *Router) viewTask(task string, excluded map[string]bool, now time.Time, buf []armView) (cs []armView, total float64) {
	cs = buf
	for _, m := range r.cat.byWeight {
		if excluded[m.Ref] {
			continue
		}
		k := [2]string{task, m.Ref}
		a := decayTo(r.aff[k], now, r.half)
		p := priorOf(m)
		c := armView{m: m, full: posteriorOf(p, a, now, 0), faded: posteriorOf(p, a, now, r.stale), rel: r.cat.relPrice(m),
			evidence: a.Pos + a.Neg, last: a.LastSignal, lastSignal: a.LastSignal}
		if st := r.arms[k]; st != nil {
			// For re-checks, an arm was last looked at by its newest probe
			// or detected change; evidence from escalations alone does not
			// count (its detector watches that).
			if t := later(st.lastProbe, st.changeAt); !t.IsZero() {
				c.last = t
			}
			c.rising = st.det.rising()
		}
		c.u = c.full.mean() - r.lambda*c.rel
		total += c.evidence
		cs = append(cs, c)
	}
	return cs, total
}

// incumbentOf returns the index of the task's incumbent: the arm with the
// highest mean utility, except that the arm that was the incumbent stays
// while no other arm's mean utility is above it by more than
// IncumbentZ standard deviations of their difference (so noise in two
// close estimates does not switch traffic back and forth). keep=false
// (some models are excluded) neither uses nor records the incumbent.
// r.mu is held.
func (r *Router) incumbentOf(task string, cs []armView, keep bool) int {
	g := 0
	for i := range cs {
		if cs[i].u > cs[g].u {
			g = i
		}
	}
	if !keep {
		return g
	}
	t := r.task(task)
	if prev := t.incumbent; prev != "" && prev != cs[g].m.Ref {
		for i := range cs {
			if cs[i].m.Ref == prev {
				if cs[g].u-cs[i].u <= r.incumbentZ*math.Hypot(cs[g].full.sd(), cs[i].full.sd()) {
					g = i
				}
				break
			}
		}
	}
	if t.incumbent != cs[g].m.Ref {
		t.incumbent, t.dirty = cs[g].m.Ref, true
	}
	return g
}

// settle marks the arms the stop rule rules out against the incumbent g.
// A settled arm stays settled against that incumbent while no new
// evidence about it arrives (the decay of its old evidence alone does not
// bring it back): only new evidence (an escalation's or a probe's
// answer), its change detector or a new incumbent reopen it. r.mu is
// held.
func (r *Router) settle(task string, cs []armView, g int, now time.Time) {
	h := r.horizon(task, now)
	for i := range cs {
		if i == g {
			continue
		}
		c := &cs[i]
		st := r.arm([2]string{task, c.m.Ref})
		switch {
		case st.settledVs == cs[g].m.Ref && !c.lastSignal.After(st.settledAt):
			c.settled = true
		case !couldWin(c.full, cs[g].full, c.rel, cs[g].rel, r.lambda, r.settleZ):
			c.settled, c.stopped = true, true
			st.settledVs, st.settledAt, st.dirty = cs[g].m.Ref, now, true
		case !r.noVOI && !worthExploring(c.full, cs[g].full, c.rel, cs[g].rel, r.lambda, h):
			c.settled = true
			st.settledVs, st.settledAt, st.dirty = cs[g].m.Ref, now, true
		case st.settledVs != "":
			st.settledVs, st.dirty = "", true
		}
	}
}

// taskRate is a task type's decayed count of learned choices and when
// it was first seen, for the horizon of the value of information.
type taskRate struct {
	n        float64
	at, seen time.Time
}

// countChoice counts one learned choice of task. r.mu is held.
func (r *Router) countChoice(task string, now time.Time) {
	ts := r.task(task)
	t := ts.rate
	if t.seen.IsZero() {
		t.seen = now
	}
	if !t.at.IsZero() && now.After(t.at) {
		t.n *= decayFactor(now.Sub(t.at), r.half)
	}
	t.n++
	t.at = now
	ts.rate, ts.dirty = t, true
}

// horizon is the number of the task's requests over which what the
// router learns now still counts: its request rate times the mean life
// of evidence (half-life / ln 2), estimated from the decayed count of its
// learned choices (corrected while the task is younger than that). r.mu
// is held.
func (r *Router) horizon(task string, now time.Time) float64 {
	t := r.task(task).rate
	if t.seen.IsZero() {
		return 0
	}
	n := t.n * decayFactor(now.Sub(t.at), r.half)
	if young := 1 - decayFactor(now.Sub(t.seen), r.half); young > 0.01 {
		return n / young
	}
	return n / 0.01
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
