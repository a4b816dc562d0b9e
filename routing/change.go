package routing

import "math"

// Change detection per (task type, model). The decayed posterior averages
// the signal stream; a change of the model (a silent regression, or an
// upgrade seen through the few requests a model still gets) shows first
// as a run of signals the posterior did not expect. changeDetector is a
// two-sided Bernoulli CUSUM on that stream: each run compares the
// likelihood of the signals under the acceptance the posterior had when
// the run began (ref) against ref shifted down (a drop) or up (a rise).
// When a run's log-likelihood ratio passes the threshold the detector
// fires and hands back the evidence gathered since the run began, which
// is the best estimate of the change point; the caller replaces the
// arm's evidence by it, so the arm's uncertainty widens and the router
// re-checks it at once.

// Defaults of the change detector, chosen in the route simulator (see
// docs/routing.md, "Change detection").
const (
	// DefaultChangeShift is the size of the change tested for: acceptance
	// moving by this much from the run's reference.
	DefaultChangeShift = 0.3
	// DefaultDropThreshold is the log-likelihood ratio at which a drop
	// run fires. A false drop alarm on a busy model is costly (the router
	// leaves its best model), so the bar is high: about e^7 signals pass
	// between false alarms on an unchanged model.
	DefaultDropThreshold = 9.0
	// DefaultRiseThreshold is the bar for a rise. Rises are seen through
	// the few answers a settled model still gets, and a false alarm only
	// costs a few more tries of that model, so it is lower.
	DefaultRiseThreshold = 4.0
	// DefaultChangeGuard: each run starts from the estimate moved this
	// many standard deviations away from the change it tests for, so the
	// noise of the estimate itself does not look like a change.
	DefaultChangeGuard = 1.5
	// minDetectEvidence: below this decayed evidence the estimate is
	// uncertain anyway and the detector waits.
	minDetectEvidence = 8
	// keepAfterChange is the weight of the history kept (at its old
	// mean) beside the evidence since the change point when a change is
	// detected.
	keepAfterChange = 3.0
)

// changeParams tunes a changeDetector.
type changeParams struct {
	shift, drop, rise, guard float64
}

// cusumRun is one side of the detector.
type cusumRun struct {
	s   float64 // log-likelihood ratio of the run (≥ 0)
	ref float64 // the reference acceptance when the run began
	// pos and neg are the signal weights seen since the run began.
	pos, neg float64
}

// changeDetector watches one arm for a drop and for a rise.
type changeDetector struct {
	down, up cusumRun
	// fired counts detections (for logs and tests).
	fired int
}

// Change directions reported by observe.
const (
	changeNone = 0
	changeDrop = -1
	changeRise = 1
)

// clampP keeps a probability away from 0 and 1 so that logs stay finite.
func clampP(p float64) float64 { return min(max(p, 0.02), 0.98) }

// step adds one weighted signal to a run whose alternative is ref+shift
// (shift may be negative). It returns true when the run passes threshold.
func (c *cusumRun) step(ref float64, positive bool, w, shift, threshold float64) bool {
	if c.s == 0 {
		c.ref, c.pos, c.neg = clampP(ref), 0, 0
	}
	p0 := c.ref
	p1 := clampP(p0 + shift)
	if (shift > 0 && p1 <= p0) || (shift < 0 && p1 >= p0) {
		// No room to move that way (a reference at the edge).
		c.s = 0
		return false
	}
	var llr float64
	if positive {
		llr = w * math.Log(p1/p0)
	} else {
		llr = w * math.Log((1-p1)/(1-p0))
	}
	c.s = max(0, c.s+llr)
	if c.s == 0 {
		c.pos, c.neg = 0, 0
		return false
	}
	if positive {
		c.pos += w
	} else {
		c.neg += w
	}
	return c.s >= threshold
}

// observe feeds one signal of weight w; ref is the arm's current
// acceptance estimate. On a detection it returns the direction and the
// evidence since the change point, and starts both runs afresh.
func (d *changeDetector) observe(ref, sd float64, positive bool, w float64, p changeParams) (dir int, pos, neg float64) {
	if w <= 0 {
		return changeNone, 0, 0
	}
	drop := d.down.step(ref-p.guard*sd, positive, w, -p.shift, p.drop)
	rise := d.up.step(ref+p.guard*sd, positive, w, p.shift, p.rise)
	switch {
	case drop:
		dir, pos, neg = changeDrop, d.down.pos, d.down.neg
	case rise:
		dir, pos, neg = changeRise, d.up.pos, d.up.neg
	default:
		return changeNone, 0, 0
	}
	d.down, d.up = cusumRun{}, cusumRun{}
	d.fired++
	return dir, pos, neg
}

// dropLLR is the log-likelihood ratio one signal of weight w adds to a
// drop run of an arm whose estimate is ref (standard deviation sd).
func dropLLR(ref, sd float64, positive bool, w float64, p changeParams) float64 {
	p0 := clampP(ref - p.guard*sd)
	p1 := clampP(p0 - p.shift)
	if p1 >= p0 {
		return 0
	}
	if positive {
		return w * math.Log(p1/p0)
	}
	return w * math.Log((1-p1)/(1-p0))
}

// rising reports whether the rise run leans toward a rise (a settled
// arm is then re-checked by a probe sequence at once).
func (d *changeDetector) rising() bool { return d.up.s >= risingLLR }

// risingLLR is the rise run's log-likelihood ratio from which a settled
// arm is re-checked at once (a quarter of the default rise threshold).
const risingLLR = 1.0
