package routing

import (
	"context"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// LearningStore keeps the router's learning state beside the affinity
// rows: the change detectors, the probe sequences, budgets and last
// probes, the horizon counts and the incumbents, one row per (task type,
// model) arm and per task type. With it a restart (every deploy)
// continues what the router was in the middle of noticing; without it
// (a Store that does not implement it) the state lives in memory only.
// store.DB and MemStore implement it. Safe for concurrent use.
type LearningStore interface {
	// LearningState returns every stored arm and task.
	LearningState(ctx context.Context) ([]core.RouterArm, []core.RouterTask, error)
	// AddSignalAndLearn records a signal, replaces the (task, model)
	// affinity row by fn(current) and upserts arms and tasks, in one
	// transaction; a signal its request already recorded changes nothing
	// (it returns 0 and fn is not called).
	AddSignalAndLearn(ctx context.Context, s core.Signal, task, model string, fn func(core.Affinity) core.Affinity,
		arms []core.RouterArm, tasks []core.RouterTask) (int64, error)
	// SaveLearning upserts arms and tasks.
	SaveLearning(ctx context.Context, arms []core.RouterArm, tasks []core.RouterTask) error
	// ExploreSpentSince sums the cost of the probes (ledger purpose
	// "explore") since a time.
	ExploreSpentSince(ctx context.Context, since time.Time) (float64, error)
}

var _ LearningStore = (*store.DB)(nil)
var _ LearningStore = (*MemStore)(nil)

// armState is the learning state of one (task type, model) arm beside
// its affinity row (the task "" arm of a model holds the model-wide drop
// run). It is persisted through LearningStore.
type armState struct {
	det changeDetector
	// seq is the running probe sequence.
	seq       probeSeq
	lastProbe time.Time
	// settledVs is the incumbent this arm was settled against, at
	// settledAt ("" = not settled).
	settledVs string
	settledAt time.Time
	// changeAt, changeDir and changeScope describe the newest change
	// detected on the arm ("task", "model" or "probe").
	changeAt    time.Time
	changeDir   int
	changeScope string
	// poolPos and poolNeg are the arm's evidence since its model's
	// model-wide drop run began.
	poolPos, poolNeg float64
	// dirty: changed since it was last written.
	dirty bool
}

// taskState is the router's state for one task type.
type taskState struct {
	budget    probeBudget
	rate      taskRate
	incumbent string
	dirty     bool
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

// task returns the state of a task type, creating it; r.mu is held.
func (r *Router) task(name string) *taskState {
	t := r.tasks[name]
	if t == nil {
		t = &taskState{}
		r.tasks[name] = t
	}
	return t
}

func (st *armState) record(task, model string, now time.Time) core.RouterArm {
	run := func(c cusumRun) core.RouterRun { return core.RouterRun{LLR: c.s, Ref: c.ref, Pos: c.pos, Neg: c.neg} }
	q := st.seq
	return core.RouterArm{Task: task, Model: model, Drop: run(st.det.down), Rise: run(st.det.up), PoolPos: st.poolPos, PoolNeg: st.poolNeg,
		Seq:       core.RouterSeq{Active: q.active, P0: q.p0, P1: q.p1, LLR: q.llr, Pos: q.pos, Neg: q.neg, N: q.n, Seen: q.seen},
		LastProbe: st.lastProbe, SettledVs: st.settledVs, SettledAt: st.settledAt,
		ChangeAt: st.changeAt, ChangeDir: st.changeDir, ChangeScope: st.changeScope, UpdatedAt: now}
}

func armFromRecord(a core.RouterArm) *armState {
	run := func(c core.RouterRun) cusumRun { return cusumRun{s: c.LLR, ref: c.Ref, pos: c.Pos, neg: c.Neg} }
	q := a.Seq
	return &armState{det: changeDetector{down: run(a.Drop), up: run(a.Rise)},
		seq:       probeSeq{active: q.Active, p0: q.P0, p1: q.P1, llr: q.LLR, pos: q.Pos, neg: q.Neg, n: q.N, seen: q.Seen},
		lastProbe: a.LastProbe, settledVs: a.SettledVs, settledAt: a.SettledAt,
		changeAt: a.ChangeAt, changeDir: a.ChangeDir, changeScope: a.ChangeScope, poolPos: a.PoolPos, poolNeg: a.PoolNeg}
}

func (t *taskState) record(task string, now time.Time) core.RouterTask {
	return core.RouterTask{Task: task, ProbeTokens: t.budget.n, ProbeCost: t.budget.cost, Choices: t.rate.n, ChoicesAt: t.rate.at,
		FirstSeen: t.rate.seen, Incumbent: t.incumbent, UpdatedAt: now}
}

func taskFromRecord(t core.RouterTask) *taskState {
	return &taskState{budget: probeBudget{n: t.ProbeTokens, cost: t.ProbeCost}, rate: taskRate{n: t.Choices, at: t.ChoicesAt, seen: t.FirstSeen}, incumbent: t.Incumbent}
}

// loadLearning reads the stored learning state and today's exploration
// and judge spend, once, before the first decision. r.mu is held.
func (r *Router) loadLearning(ctx context.Context, ls LearningStore) {
	arms, tasks, err := ls.LearningState(ctx)
	if err != nil {
		r.log.Warn("load router learning state; starting afresh", "err", err)
		return
	}
	for _, a := range arms {
		r.arms[[2]string{a.Task, a.Model}] = armFromRecord(a)
	}
	for _, t := range tasks {
		r.tasks[t.Task] = taskFromRecord(t)
	}
	day := r.now().UTC().Truncate(24 * time.Hour)
	if spent, err := ls.ExploreSpentSince(ctx, day); err == nil {
		r.exploreDay, r.exploreSpent = day, spent
	} else {
		r.log.Warn("load today's exploration spend", "err", err)
	}
	// The judge's, so that a restart does not begin its day afresh.
	if lt, ok := r.o.Store.(ledgerTotals); ok && r.o.Judge.DailyUSD > 0 {
		totals, err := lt.UsageTotals(ctx, day, "purpose", "")
		if err != nil {
			r.log.Warn("load today's judge spend", "err", err)
		}
		for _, t := range totals {
			if t.Key == PurposeJudge {
				r.judgeDay, r.judgeSpent = day, t.CostUSD
			}
		}
	}
}

// dirtyRecords collects, and marks clean, the records of the task's
// changed arms and of the task itself (task "" = every arm and task).
// r.mu is held.
func (r *Router) dirtyRecords(task string, now time.Time) ([]core.RouterArm, []core.RouterTask) {
	var arms []core.RouterArm
	var tasks []core.RouterTask
	for k, st := range r.arms {
		if st.dirty && (task == "" || k[0] == task) {
			arms = append(arms, st.record(k[0], k[1], now))
			st.dirty = false
		}
	}
	for name, t := range r.tasks {
		if t.dirty && (task == "" || name == task) {
			tasks = append(tasks, t.record(name, now))
			t.dirty = false
		}
	}
	return arms, tasks
}

// SaveState writes the learning state changed since it was last written
// (probes started, arms settled, budgets and counts of choices since the
// last signal); call it before shutting down. Signals write their own
// state as they are recorded. Without a LearningStore it does nothing.
func (r *Router) SaveState(ctx context.Context) error {
	ls, ok := r.o.Store.(LearningStore)
	if !ok {
		return nil
	}
	r.learnMu.Lock()
	defer r.learnMu.Unlock()
	r.mu.Lock()
	arms, tasks := r.dirtyRecords("", r.now())
	r.mu.Unlock()
	return ls.SaveLearning(ctx, arms, tasks)
}
