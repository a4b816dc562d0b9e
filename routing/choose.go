package routing

import "context"

// Choice is the routing decision for one call, made before the call so the
// caller can shape the request for the model that will answer it (trim or
// compact the history to its context window). Hand it back in Call.Choice.
type Choice struct {
	// Model is the model the call starts on; failover may move on to the
	// next model of the chain.
	Model Model
	// TaskType is the classified (or given) task type.
	TaskType string
	// Reason says which rule chose the model.
	Reason string
	d      decision
}

// Choose classifies the call and applies the precedence rules and the
// budget, drawing from the learned affinity as Chat does; it calls no
// model. On error the Choice still carries the task type.
func (r *Router) Choose(ctx context.Context, c Call) (*Choice, error) {
	r.load(ctx)
	task := c.TaskType
	if task == "" {
		task = r.o.Classifier.Classify(c.Req.Messages)
	}
	d, err := r.decide(ctx, c, task, true)
	ch := &Choice{Model: d.m, TaskType: task, Reason: d.reason, d: d}
	return ch, err
}
