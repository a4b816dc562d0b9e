package routing

import (
	"context"
	"fmt"
	"math"
	"sort"

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

// deferrable is the item's core.Deferred when it goes to the store r
// writes to (nil otherwise): the usage rows it collects are stored with
// the item's reply.
func (r *Router) deferrable(ctx context.Context) *core.Deferred {
	if d := core.DeferredFrom(ctx); d.For(r.o.Store) {
		return d
	}
	return nil
}

// recordSignal is RecordSignal; mayDefer lets the write wait for the
// item's reply (core.Deferred), whose transaction stores the signal, its
// affinity fold and the learning state it moved.
func (r *Router) recordSignal(ctx context.Context, s core.Signal, mayDefer bool) error {
	var d *core.Deferred
	if mayDefer {
		d = r.deferrable(ctx)
	}
	return r.record(ctx, s, d)
}

// RecordSignal stores a quality signal and folds it into the affinity of
// its (task type, model); the signal, the affinity and the learning state
// it moved are written in one transaction when the store keeps learning
// state. It implements core.SignalSink.
func (r *Router) RecordSignal(ctx context.Context, s core.Signal) error {
	return r.record(ctx, s, nil)
}

// record is RecordSignal, written with d's transaction when d is set.
func (r *Router) record(ctx context.Context, s core.Signal, d *core.Deferred) error {
	r.load(ctx)
	if s.At.IsZero() {
		s.At = r.now()
	}
	if s.Weight == 0 {
		s.Weight = 1
	}
	// The stored weight is the one learned from: the caller's weight times
	// the documented weight of the signal's kind.
	s.Weight *= signalWeight(s.Kind, r.o.SignalWeights)
	if s.Model == "" || s.TaskType == "" || s.Polarity == core.Neutral || s.Weight == 0 {
		// Nothing to learn (a kind weighted 0 is recorded only).
		if _, err := r.o.Store.AddSignal(ctx, s); err != nil {
			return fmt.Errorf("record %s signal: %w", s.Kind, err)
		}
		return nil
	}
	model := s.Model
	if m, ok := r.cat.resolve(s.Model); ok {
		model = m.Ref
	}
	s.Model = model
	r.learnMu.Lock()
	defer r.learnMu.Unlock()
	det, arms, tasks := r.detect(s, model)
	var updated core.Affinity
	fn := func(a core.Affinity) core.Affinity {
		updated = fold(a, s, r.half, r.capEv)
		if det.dir != changeNone {
			updated = restart(updated, det.pos, det.neg)
		}
		return updated
	}
	if d != nil {
		d.AddSignal(core.DeferredSignal{Signal: s, Task: s.TaskType, Model: model, Fold: fn, Arms: arms, Tasks: tasks,
			Done: func(id int64) {
				if id != 0 {
					r.learned(context.WithoutCancel(ctx), s, model, updated, det)
				}
			}})
		return nil
	}
	var id int64
	var err error
	switch st := r.o.Store.(type) {
	case LearningStore:
		id, err = st.AddSignalAndLearn(ctx, s, s.TaskType, model, fn, arms, tasks)
	case signalAffinityStore:
		id, err = st.AddSignalAndAffinity(ctx, s, s.TaskType, model, fn)
	default:
		if id, err = r.o.Store.AddSignal(ctx, s); err == nil && id != 0 {
			err = r.o.Store.UpdateAffinity(ctx, s.TaskType, model, fn)
		}
	}
	if err != nil {
		return fmt.Errorf("record %s signal and affinity %s/%s: %w", s.Kind, s.TaskType, model, err)
	}
	if id == 0 {
		return nil // its request recorded it already
	}
	r.learned(ctx, s, model, updated, det)
	return nil
}

// learned keeps a stored signal's fold of the affinity, logs a detected
// change, and restarts the evidence of the other task types a model-wide
// drop found.
func (r *Router) learned(ctx context.Context, s core.Signal, model string, updated core.Affinity, det detection) {
	r.mu.Lock()
	r.aff[[2]string{s.TaskType, s.Model}] = updated
	r.mu.Unlock()
	r.log.Debug("quality signal", "kind", s.Kind, "polarity", s.Polarity.String(), "model", s.Model, "task", s.TaskType)
	if det.dir != changeNone {
		r.log.Info("acceptance change detected", "change", directionName(det.dir), "model", s.Model, "task", s.TaskType, "evidence_pos", det.pos, "evidence_neg", det.neg)
	}
	// A model-wide drop restarts the evidence of the model's other task
	// types that dropped with it.
	for _, o := range det.others {
		var upd core.Affinity
		err := r.o.Store.UpdateAffinity(ctx, o.task, model, func(a core.Affinity) core.Affinity {
			upd = restart(decayTo(a, s.At, r.half), o.pos, o.neg)
			return upd
		})
		if err != nil {
			r.log.Error("restart affinity after a model-wide drop", "model", model, "task", o.task, "err", err)
			continue
		}
		r.mu.Lock()
		r.aff[[2]string{o.task, model}] = upd
		r.mu.Unlock()
		r.log.Info("acceptance change detected", "change", "drop", "scope", "model", "model", model, "task", o.task, "evidence_pos", o.pos, "evidence_neg", o.neg)
	}
}

// restart replaces an affinity row's evidence after a detected change:
// the evidence since the change point (pos, neg), with the history shrunk
// to keepAfterChange at its old mean, so the estimate is uncertain and
// re-checked at once.
func restart(a core.Affinity, pos, neg float64) core.Affinity {
	if t := a.Pos + a.Neg; t > 0 {
		f := min(keepAfterChange/t, 1)
		a.Pos, a.Neg = a.Pos*f, a.Neg*f
	}
	a.Pos += pos
	a.Neg += neg
	return a
}

// detection is what one signal changed in the detectors: a change of its
// own arm (dir, with the evidence since the change point) and the other
// task types of its model that a model-wide drop found with it.
type detection struct {
	dir      int
	pos, neg float64
	others   []poolChange
}

// poolChange is one task type of a model-wide drop with its evidence
// since the drop began.
type poolChange struct {
	task     string
	pos, neg float64
}

// detect feeds a signal to its arm's probe sequence and change detector
// and to its model's model-wide drop run, against the arm's current
// acceptance estimate; it returns what changed and the learning state to
// write with the signal.
func (r *Router) detect(s core.Signal, model string) (det detection, arms []core.RouterArm, tasks []core.RouterTask) {
	k := [2]string{s.TaskType, model}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		arms, tasks = r.dirtyRecords(s.TaskType, s.At)
		if ms := r.arms[[2]string{"", model}]; ms != nil && ms.dirty {
			arms = append(arms, ms.record("", model, s.At))
			ms.dirty = false
		}
	}()
	if s.Weight <= 0 {
		return det, nil, nil
	}
	st := r.arm(k)
	positive := s.Polarity == core.Positive
	if st.seq.active {
		// A probe sequence decides about its arm's rise.
		st.dirty = true
		switch st.seq.observe(positive, s.Weight) {
		case changeRise:
			det.dir, det.pos, det.neg = changeRise, st.seq.pos, st.seq.neg
			st.seq, st.det, st.settledVs = probeSeq{}, changeDetector{}, ""
			st.changeAt, st.changeDir, st.changeScope = s.At, changeRise, "probe"
			return det, nil, nil
		case changeDrop:
			st.seq = probeSeq{}
		}
	}
	if r.o.NoChangeDetection {
		return det, nil, nil
	}
	a := decayTo(r.aff[k], s.At, r.half)
	n := a.Pos + a.Neg
	if n < minDetectEvidence {
		// Too little evidence: the estimate is uncertain anyway.
		return det, nil, nil
	}
	ref := a.Pos / n
	sd := math.Sqrt(ref * (1 - ref) / (n + 1))
	st.dirty = true
	if !r.o.NoModelDetection {
		det.others = r.pool(s, model, st, ref, sd, positive)
		for i, o := range det.others {
			if o.task == s.TaskType {
				det.dir, det.pos, det.neg = changeDrop, o.pos, o.neg
				det.others = append(det.others[:i:i], det.others[i+1:]...)
				return det, nil, nil
			}
		}
	}
	det.dir, det.pos, det.neg = st.det.observe(ref, sd, positive, s.Weight, r.chg)
	if det.dir != changeNone {
		st.settledVs = ""
		st.changeAt, st.changeDir, st.changeScope = s.At, det.dir, "task"
	}
	return det, nil, nil
}

// pool feeds a signal of (task, model) to the model's model-wide drop
// run: a CUSUM over the signals of every task type of the model, each
// against its own arm's estimate (the same log-likelihood ratio the
// arm's drop run adds). When it passes the drop threshold and at least
// two task types pushed it up, the model dropped on several task types at
// once: each of those arms restarts from its evidence since the run began
// (returned), its detector starts afresh and the change is one event of
// scope "model". One task type alone is left to its own detector. r.mu is
// held.
func (r *Router) pool(s core.Signal, model string, st *armState, ref, sd float64, positive bool) []poolChange {
	ms := r.arm([2]string{"", model})
	ms.dirty = true
	run := &ms.det.down
	run.s = max(0, run.s+dropLLR(ref, sd, positive, s.Weight, r.chg))
	if run.s == 0 {
		r.clearPool(model)
		return nil
	}
	if positive {
		st.poolPos += s.Weight
	} else {
		st.poolNeg += s.Weight
	}
	if run.s < r.chg.drop {
		return nil
	}
	var out []poolChange
	for k, as := range r.arms {
		if k[1] != model || k[0] == "" || as.poolPos+as.poolNeg == 0 {
			continue
		}
		a := decayTo(r.aff[k], s.At, r.half)
		n := a.Pos + a.Neg
		if n < minDetectEvidence {
			continue
		}
		aref := a.Pos / n
		asd := math.Sqrt(aref * (1 - aref) / (n + 1))
		if as.poolPos*dropLLR(aref, asd, true, 1, r.chg)+as.poolNeg*dropLLR(aref, asd, false, 1, r.chg) > 0 {
			out = append(out, poolChange{task: k[0], pos: as.poolPos, neg: as.poolNeg})
		}
	}
	run.s = 0
	r.clearPool(model)
	if len(out) < 2 {
		return nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].task < out[j].task })
	for _, o := range out {
		as := r.arms[[2]string{o.task, model}]
		as.det, as.seq, as.dirty = changeDetector{}, probeSeq{}, true
		as.changeAt, as.changeDir, as.changeScope = s.At, changeDrop, "model"
		for k, other := range r.arms {
			// The task's settled arms are re-examined against a new
			// incumbent.
			if k[0] == o.task && other.settledVs != "" {
				other.settledVs, other.dirty = "", true
			}
		}
	}
	return out
}

// clearPool restarts the per-task evidence of a model's model-wide run.
// r.mu is held.
func (r *Router) clearPool(model string) {
	for k, as := range r.arms {
		if k[1] == model && (as.poolPos != 0 || as.poolNeg != 0) {
			as.poolPos, as.poolNeg, as.dirty = 0, 0, true
		}
	}
}
