package routing

import (
	"context"
	"fmt"
	"math"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// SignalAccepted marks an implicit acceptance: the user moved on to a new
// question without rejecting the previous answer.
const SignalAccepted core.SignalKind = "accepted"

var _ core.SignalSink = (*Router)(nil)

// signalAffinityStore is the optional Store method that records a signal
// and folds it into the affinity in one transaction.
type signalAffinityStore interface {
	AddSignalAndAffinity(ctx context.Context, s core.Signal, task, model string, fn func(core.Affinity) core.Affinity) (int64, error)
}

var _ signalAffinityStore = (*store.DB)(nil)

// RecordSignal stores a quality signal and folds it into the affinity of
// its (task type, model). It implements core.SignalSink.
func (r *Router) RecordSignal(ctx context.Context, s core.Signal) error {
	return r.recordSignal(ctx, s, false)
}

// deferrable is the item's core.Deferred when it goes to the store r
// writes to (nil otherwise).
func (r *Router) deferrable(ctx context.Context) *core.Deferred {
	if d := core.DeferredFrom(ctx); d.For(r.o.Store) {
		return d
	}
	return nil
}

// recordSignal is RecordSignal; mayDefer lets the write wait for the
// item's reply (core.Deferred), which stores it in its own transaction.
func (r *Router) recordSignal(ctx context.Context, s core.Signal, mayDefer bool) error {
	if s.At.IsZero() {
		s.At = r.now()
	}
	if s.Weight == 0 {
		s.Weight = 1
	}
	// The stored weight is the one learned from: the caller's weight times
	// the documented weight of the signal's kind.
	s.Weight *= signalWeight(s.Kind, r.o.SignalWeights)
	var d *core.Deferred
	if mayDefer {
		d = r.deferrable(ctx)
	}
	if s.Model == "" || s.TaskType == "" || s.Polarity == core.Neutral {
		if d != nil {
			d.AddSignal(core.DeferredSignal{Signal: s})
			return nil
		}
		if _, err := r.o.Store.AddSignal(ctx, s); err != nil {
			return fmt.Errorf("record %s signal: %w", s.Kind, err)
		}
		return nil
	}
	model := s.Model
	if m, ok := r.cat.resolve(s.Model); ok {
		model = m.Ref
	}
	dir, segPos, segNeg := r.detect(s, model)
	var updated core.Affinity
	fn := func(a core.Affinity) core.Affinity {
		as := s
		as.Model = model
		updated = fold(a, as, r.half, r.capEv)
		if dir != changeNone {
			// A change: the evidence since the change point, with the
			// history shrunk to keepAfterChange, replaces the history, so
			// the estimate is uncertain and re-checked at once.
			if t := updated.Pos + updated.Neg; t > 0 {
				f := min(keepAfterChange/t, 1)
				updated.Pos, updated.Neg = updated.Pos*f, updated.Neg*f
			}
			updated.Pos += segPos
			updated.Neg += segNeg
		}
		return updated
	}
	if d != nil {
		d.AddSignal(core.DeferredSignal{Signal: s, Task: s.TaskType, Model: model, Fold: fn, Done: func(id int64) {
			if id != 0 {
				r.learned(s, model, updated, dir, segPos, segNeg)
			}
		}})
		return nil
	}
	if both, ok := r.o.Store.(signalAffinityStore); ok {
		// One transaction instead of two before the LLM request.
		id, err := both.AddSignalAndAffinity(ctx, s, s.TaskType, model, fn)
		if err != nil {
			return fmt.Errorf("record %s signal and affinity %s/%s: %w", s.Kind, s.TaskType, model, err)
		}
		if id == 0 {
			return nil // its request recorded it already
		}
	} else {
		id, err := r.o.Store.AddSignal(ctx, s)
		if err != nil {
			return fmt.Errorf("record %s signal: %w", s.Kind, err)
		}
		if id == 0 {
			return nil // its request recorded it already
		}
		if err := r.o.Store.UpdateAffinity(ctx, s.TaskType, model, fn); err != nil {
			return fmt.Errorf("update affinity %s/%s: %w", s.TaskType, model, err)
		}
	}
	r.learned(s, model, updated, dir, segPos, segNeg)
	return nil
}

// learned keeps a stored signal's fold of the affinity and logs it.
func (r *Router) learned(s core.Signal, model string, updated core.Affinity, dir int, segPos, segNeg float64) {
	s.Model = model
	r.mu.Lock()
	r.aff[[2]string{s.TaskType, s.Model}] = updated
	r.mu.Unlock()
	r.log.Debug("quality signal", "kind", s.Kind, "polarity", s.Polarity.String(), "model", s.Model, "task", s.TaskType)
	if dir != changeNone {
		what := "drop"
		if dir == changeRise {
			what = "rise"
		}
		r.log.Info("acceptance change detected", "change", what, "model", s.Model, "task", s.TaskType, "evidence_pos", segPos, "evidence_neg", segNeg)
	}
}

// detect feeds a signal to its (task, model)'s change detector, against
// the arm's current acceptance estimate.
func (r *Router) detect(s core.Signal, model string) (dir int, pos, neg float64) {
	if r.o.NoChangeDetection || s.Weight <= 0 {
		return changeNone, 0, 0
	}
	k := [2]string{s.TaskType, model}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := decayTo(r.aff[k], s.At, r.half)
	n := a.Pos + a.Neg
	if n < minDetectEvidence {
		// Too little evidence: the estimate is uncertain anyway.
		return changeNone, 0, 0
	}
	ref := a.Pos / n
	sd := math.Sqrt(ref * (1 - ref) / (n + 1))
	st := r.arm(k)
	dir, pos, neg = st.det.observe(ref, sd, s.Polarity == core.Positive, s.Weight, r.chg)
	if dir != changeNone {
		st.settledVs = ""
	}
	return dir, pos, neg
}
