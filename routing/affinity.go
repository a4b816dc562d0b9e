package routing

import (
	"math"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Learning parameters. The decay law and the choice rule are explained in
// docs/routing.md.
const (
	// DefaultEvidenceCap bounds the decayed evidence of one (task, model)
	// pair: past it, old evidence is scaled down so the newest signals
	// always move the estimate (fast recovery after a silent change).
	DefaultEvidenceCap = 200
	// DefaultCostWeight is λ in utility = acceptance − λ·relative price.
	DefaultCostWeight = 0.15
	// DefaultExplore scales the sampling spread.
	DefaultExplore = 0.6
)

// decayFactor is 2^(−dt/halfLife): a signal's weight halves every
// halfLife (decay_days/2).
func decayFactor(dt, halfLife time.Duration) float64 {
	if halfLife <= 0 || dt <= 0 {
		return 1
	}
	return math.Exp2(-float64(dt) / float64(halfLife))
}

// decayTo returns a with its evidence decayed to now.
func decayTo(a core.Affinity, now time.Time, halfLife time.Duration) core.Affinity {
	if a.UpdatedAt.IsZero() || !now.After(a.UpdatedAt) {
		return a
	}
	f := decayFactor(now.Sub(a.UpdatedAt), halfLife)
	a.Pos *= f
	a.Neg *= f
	a.UpdatedAt = now
	return a
}

// fold adds one signal to an affinity row: decay to the signal's time,
// add its weight on its side, then scale both sides down if the total
// passes the evidence cap.
func fold(a core.Affinity, s core.Signal, halfLife time.Duration, evidenceCap float64) core.Affinity {
	at := s.At
	if at.Before(a.UpdatedAt) {
		at = a.UpdatedAt
	}
	a = decayTo(a, at, halfLife)
	a.UpdatedAt = at
	w := s.Weight
	if w == 0 {
		w = 1
	}
	// A withdrawn judgement (a reaction taken back) has a negative weight:
	// it takes back its side's weight and count, never below zero.
	n := 1
	if w < 0 {
		n = -1
	}
	switch s.Polarity {
	case core.Positive:
		a.Pos += w
		a.Positives = max(a.Positives+n, 0)
	case core.Negative:
		a.Neg += w
		a.Negatives = max(a.Negatives+n, 0)
	default:
		return a
	}
	a.Pos, a.Neg = max(a.Pos, 0), max(a.Neg, 0)
	if t := a.Pos + a.Neg; evidenceCap > 0 && t > evidenceCap {
		a.Pos *= evidenceCap / t
		a.Neg *= evidenceCap / t
	}
	if n > 0 && s.At.After(a.LastSignal) {
		a.LastSignal = s.At
	}
	return a
}

// posterior is the acceptance estimate of a model for a task: a Beta
// posterior, its prior from the catalog weight (see priorOf).
type posterior struct{ alpha, beta float64 }

func (p posterior) mean() float64 { return p.alpha / (p.alpha + p.beta) }

// sample draws from a normal approximation of the posterior.
func (p posterior) sample(z float64) float64 {
	n := p.alpha + p.beta
	m := p.mean()
	return min(max(m+z*math.Sqrt(m*(1-m)/(n+1)), 0), 1)
}

// Score is the public view of one (task, model) affinity for the CLI.
type Score struct {
	Task, Model          string
	Score                float64 // decayed acceptance rate (0.5 = no data)
	Evidence             float64 // decayed signal weight behind it
	Positives, Negatives int
	LastSignal           time.Time
}

// ScoreOf decays a stored row to now and summarizes it.
func ScoreOf(a core.Affinity, now time.Time, decayDays float64) Score {
	a = decayTo(a, now, halfLifeOf(decayDays))
	s := Score{Task: a.Task, Model: a.Model, Evidence: a.Pos + a.Neg, Positives: a.Positives, Negatives: a.Negatives, LastSignal: a.LastSignal, Score: 0.5}
	if s.Evidence > 0 {
		s.Score = a.Pos / s.Evidence
	}
	return s
}

// staleHalfLifeOf is the confidence half-life of an untried pair:
// decay_days/10 (3 days by default).
func staleHalfLifeOf(decayDays float64) time.Duration {
	if decayDays <= 0 {
		decayDays = 30
	}
	return time.Duration(decayDays / 10 * float64(24*time.Hour))
}

func halfLifeOf(decayDays float64) time.Duration {
	if decayDays <= 0 {
		decayDays = 30
	}
	return time.Duration(decayDays / 2 * float64(24*time.Hour))
}
