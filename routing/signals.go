package routing

import (
	"context"
	"fmt"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// SignalAccepted marks an implicit acceptance: the user moved on to a new
// question without rejecting the previous answer.
const SignalAccepted core.SignalKind = "accepted"

var _ core.SignalSink = (*Router)(nil)

// RecordSignal stores a quality signal and folds it into the affinity of
// its (task type, model). It implements core.SignalSink.
func (r *Router) RecordSignal(ctx context.Context, s core.Signal) error {
	if s.At.IsZero() {
		s.At = r.now()
	}
	if s.Weight == 0 {
		s.Weight = 1
	}
	if _, err := r.o.Store.AddSignal(ctx, s); err != nil {
		return fmt.Errorf("record %s signal: %w", s.Kind, err)
	}
	if s.Model == "" || s.TaskType == "" || s.Polarity == core.Neutral {
		return nil
	}
	if m, ok := r.cat.resolve(s.Model); ok {
		s.Model = m.Ref
	}
	var updated store.Affinity
	err := r.o.Store.UpdateAffinity(ctx, s.TaskType, s.Model, func(a store.Affinity) store.Affinity {
		updated = fold(a, s, r.half, r.capEv)
		return updated
	})
	if err != nil {
		return fmt.Errorf("update affinity %s/%s: %w", s.TaskType, s.Model, err)
	}
	r.mu.Lock()
	r.aff[[2]string{s.TaskType, s.Model}] = updated
	r.mu.Unlock()
	r.log.Debug("quality signal", "kind", s.Kind, "polarity", s.Polarity.String(), "model", s.Model, "task", s.TaskType)
	return nil
}
