package routing

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Explanation says why the learned choice for one task type is what it
// is: each model's acceptance estimate, price and evidence, which model
// is the incumbent, which are still explored and which are settled, and
// the newest change the detectors noticed. /model and the status page
// show it.
type Explanation struct {
	Task string `json:"task"`
	// Model is the incumbent: the model the learned choice answers with
	// when it does not explore ("" while the task has no evidence yet).
	Model string `json:"model"`
	// State is "no evidence yet" (the primary or highest weight answers),
	// "exploring" (some other model is still sampled) or "settled" (only
	// the incumbent answers, besides probes).
	State string `json:"state"`
	// Evidence is the task's decayed evidence over every model.
	Evidence float64 `json:"evidence"`
	// Arms are every model, best mean utility first.
	Arms []ArmStanding `json:"models"`
	// LastChange is the newest change detected for the task (nil =
	// none since the router started keeping state).
	LastChange *DetectedChange `json:"last_change,omitempty"`
}

// ArmStanding is one model's standing for a task type.
type ArmStanding struct {
	Model string `json:"model"`
	// Acceptance is the estimate (prior from the weight plus evidence),
	// Evidence the decayed signal weight behind it.
	Acceptance float64 `json:"acceptance"`
	Evidence   float64 `json:"evidence"`
	// Price is the blended USD per million tokens; Utility is acceptance
	// − λ · price relative to the most expensive model.
	Price   float64 `json:"price_per_mtok"`
	Utility float64 `json:"utility"`
	// Role is "incumbent", "exploring" (sampled), "settled" (could still
	// win but not worth exploring now: re-checked by probes) or "ruled
	// out" (cannot beat the incumbent).
	Role      string    `json:"role"`
	LastProbe time.Time `json:"last_probe,omitzero"`
}

// DetectedChange is a change the detectors noticed.
type DetectedChange struct {
	Model string    `json:"model"`
	At    time.Time `json:"at"`
	// Direction is "drop" or "rise"; Scope is "task" (this task type's
	// detector) or "model" (the model dropped on several task types at
	// once).
	Direction string `json:"direction"`
	Scope     string `json:"scope"`
}

// Explain explains the learned choice for task (TaskChat when "").
func (r *Router) Explain(ctx context.Context, task string) Explanation {
	r.load(ctx)
	if task == "" {
		task = TaskChat
	}
	now := r.now()
	e := Explanation{Task: task, State: "no evidence yet"}
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, total := r.viewTask(task, nil, now, nil)
	e.Evidence = total
	if len(cs) == 0 {
		return e
	}
	g := 0
	if total >= 0.5 {
		g = r.incumbentOf(task, cs, false)
		if prev := r.task(task).incumbent; prev != "" {
			for i := range cs {
				if cs[i].m.Ref == prev {
					g = i
				}
			}
		}
		r.settle(task, cs, g, now)
		e.Model, e.State = cs[g].m.Ref, "settled"
	}
	for i, c := range cs {
		a := ArmStanding{Model: c.m.Ref, Acceptance: c.full.mean(), Evidence: c.evidence, Price: c.m.Price(), Utility: c.u}
		switch {
		case total < 0.5:
			a.Role = "no evidence yet"
		case i == g:
			a.Role = "incumbent"
		case c.stopped:
			a.Role = "ruled out"
		case c.settled:
			a.Role = "settled"
		default:
			a.Role = "exploring"
			e.State = "exploring"
		}
		if st := r.arms[[2]string{task, c.m.Ref}]; st != nil {
			a.LastProbe = st.lastProbe
			if !st.changeAt.IsZero() && (e.LastChange == nil || st.changeAt.After(e.LastChange.At)) {
				e.LastChange = &DetectedChange{Model: c.m.Ref, At: st.changeAt, Direction: directionName(st.changeDir), Scope: st.changeScope}
			}
		}
		e.Arms = append(e.Arms, a)
	}
	sort.SliceStable(e.Arms, func(i, j int) bool { return e.Arms[i].Utility > e.Arms[j].Utility })
	return e
}

func directionName(dir int) string {
	if dir == changeRise {
		return "rise"
	}
	return "drop"
}

// String is the explanation in a few lines, for /model.
func (e Explanation) String() string {
	var b strings.Builder
	if e.Model == "" {
		fmt.Fprintf(&b, "Learned choice for %s: no evidence yet, so the rule above answers until the first signals.", e.Task)
		return b.String()
	}
	var inc ArmStanding
	for _, a := range e.Arms {
		if a.Model == e.Model {
			inc = a
		}
	}
	fmt.Fprintf(&b, "Learned choice for %s: %s, %.0f%% accepted over %.1f decayed signals at $%.2f per M tokens (utility %.2f); %s.",
		e.Task, e.Model, 100*inc.Acceptance, inc.Evidence, inc.Price, inc.Utility, e.State)
	var others []string
	for _, a := range e.Arms {
		if a.Model == e.Model {
			continue
		}
		others = append(others, fmt.Sprintf("%s %.0f%% over %.1f at $%.2f (%s)", a.Model, 100*a.Acceptance, a.Evidence, a.Price, a.Role))
		if len(others) == 3 {
			break
		}
	}
	if len(others) > 0 {
		b.WriteString("\nNext: " + strings.Join(others, "; ") + ".")
	}
	if e.LastChange == nil {
		// Said also when there is none: /model names the last change
		// detected (issue 28), and "none" is the answer while the
		// detectors have noticed nothing.
		b.WriteString("\nLast change detected: none yet.")
	}
	if c := e.LastChange; c != nil {
		scope := ""
		if c.Scope == "model" {
			scope = " on several task types at once"
		}
		fmt.Fprintf(&b, "\nLast change detected: %s %s%s at %s UTC.", c.Model, map[string]string{"drop": "dropped", "rise": "improved"}[c.Direction], scope, c.At.UTC().Format("2006-01-02 15:04"))
	}
	return b.String()
}

// ExplainAll explains the learned choice of every task type that has
// evidence, in the order of TaskTypes (other task types after, sorted).
func (r *Router) ExplainAll(ctx context.Context) []Explanation {
	r.load(ctx)
	r.mu.Lock()
	seen := map[string]bool{}
	for k, a := range r.aff {
		if a.Pos+a.Neg > 0 {
			seen[k[0]] = true
		}
	}
	r.mu.Unlock()
	var tasks []string
	for _, t := range TaskTypes {
		if seen[t] {
			tasks = append(tasks, t)
			delete(seen, t)
		}
	}
	rest := make([]string, 0, len(seen))
	for t := range seen {
		rest = append(rest, t)
	}
	sort.Strings(rest)
	var out []Explanation
	for _, t := range append(tasks, rest...) {
		out = append(out, r.Explain(ctx, t))
	}
	return out
}
