package store

import (
	"context"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

// The router's learning state (migration 100): change detectors, probe
// sequences and budgets, the horizon counts and the incumbents, one row
// per (task type, model) arm in router_arms and per task type in
// router_tasks. Rows are upserted one by one, never rewritten as a
// whole, so replicas can share them.

const routerArmCols = `task_type, model, drop_llr, drop_ref, drop_pos, drop_neg, rise_llr, rise_ref, rise_pos, rise_neg,
	pool_pos, pool_neg, seq_active, seq_p0, seq_p1, seq_llr, seq_pos, seq_neg, seq_n, seq_seen,
	last_probe, settled_vs, settled_at, change_at, change_dir, change_scope, updated_at`

const upsertRouterArm = `INSERT INTO router_arms (` + routerArmCols + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (task_type, model) DO UPDATE SET drop_llr = excluded.drop_llr, drop_ref = excluded.drop_ref,
	drop_pos = excluded.drop_pos, drop_neg = excluded.drop_neg, rise_llr = excluded.rise_llr, rise_ref = excluded.rise_ref,
	rise_pos = excluded.rise_pos, rise_neg = excluded.rise_neg, pool_pos = excluded.pool_pos, pool_neg = excluded.pool_neg,
	seq_active = excluded.seq_active, seq_p0 = excluded.seq_p0, seq_p1 = excluded.seq_p1, seq_llr = excluded.seq_llr,
	seq_pos = excluded.seq_pos, seq_neg = excluded.seq_neg, seq_n = excluded.seq_n, seq_seen = excluded.seq_seen,
	last_probe = excluded.last_probe, settled_vs = excluded.settled_vs, settled_at = excluded.settled_at,
	change_at = excluded.change_at, change_dir = excluded.change_dir, change_scope = excluded.change_scope,
	updated_at = excluded.updated_at`

const routerTaskCols = `task_type, probe_tokens, probe_cost, choices, choices_at, first_seen, incumbent, updated_at`

const upsertRouterTask = `INSERT INTO router_tasks (` + routerTaskCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (task_type) DO UPDATE SET probe_tokens = excluded.probe_tokens, probe_cost = excluded.probe_cost,
	choices = excluded.choices, choices_at = excluded.choices_at, first_seen = excluded.first_seen,
	incumbent = excluded.incumbent, updated_at = excluded.updated_at`

func routerArmArgs(a core.RouterArm) []any {
	return []any{a.Task, a.Model, a.Drop.LLR, a.Drop.Ref, a.Drop.Pos, a.Drop.Neg, a.Rise.LLR, a.Rise.Ref, a.Rise.Pos, a.Rise.Neg,
		a.PoolPos, a.PoolNeg, a.Seq.Active, a.Seq.P0, a.Seq.P1, a.Seq.LLR, a.Seq.Pos, a.Seq.Neg, a.Seq.N, a.Seq.Seen,
		timeMS(a.LastProbe), a.SettledVs, timeMS(a.SettledAt), timeMS(a.ChangeAt), a.ChangeDir, a.ChangeScope, timeMS(a.UpdatedAt)}
}

func routerTaskArgs(t core.RouterTask) []any {
	return []any{t.Task, t.ProbeTokens, t.ProbeCost, t.Choices, timeMS(t.ChoicesAt), timeMS(t.FirstSeen), t.Incumbent, timeMS(t.UpdatedAt)}
}

// writeLearning upserts arms and tasks inside tx.
func writeLearning(ctx context.Context, tx *txn, arms []core.RouterArm, tasks []core.RouterTask) error {
	for _, a := range arms {
		if _, err := tx.ExecContext(ctx, upsertRouterArm, routerArmArgs(a)...); err != nil {
			return fmt.Errorf("write router state %s/%s: %w", a.Task, a.Model, err)
		}
	}
	for _, t := range tasks {
		if _, err := tx.ExecContext(ctx, upsertRouterTask, routerTaskArgs(t)...); err != nil {
			return fmt.Errorf("write router state of task %s: %w", t.Task, err)
		}
	}
	return nil
}

// SaveLearning upserts the given arms and tasks in one transaction.
func (db *DB) SaveLearning(ctx context.Context, arms []core.RouterArm, tasks []core.RouterTask) error {
	if len(arms) == 0 && len(tasks) == 0 {
		return nil
	}
	return db.txLocking(ctx, func(tx *txn) error { return writeLearning(ctx, tx, arms, tasks) })
}

// AddSignalAndLearn is AddSignalAndAffinity that also upserts the
// router's learning state, all in one transaction: a signal, the
// affinity it changes and the detector state it moved are stored
// together or not at all. A signal its request already recorded changes
// nothing: it returns 0, and neither fn is called nor the state written.
func (db *DB) AddSignalAndLearn(ctx context.Context, s core.Signal, task, model string, fn func(core.Affinity) core.Affinity,
	arms []core.RouterArm, tasks []core.RouterTask) (int64, error) {
	var id int64
	err := db.txLocking(ctx, func(tx *txn) error {
		var err error
		if id, err = insertedID(tx.QueryRowContext(ctx, insertSignal, db.signalArgs(s)...)); err != nil {
			return fmt.Errorf("add signal: %w", err)
		}
		if id == 0 {
			return nil
		}
		if err := updateAffinity(ctx, tx, task, model, fn); err != nil {
			return err
		}
		return writeLearning(ctx, tx, arms, tasks)
	})
	return id, err
}

// LearningState returns every stored arm and task.
func (db *DB) LearningState(ctx context.Context) ([]core.RouterArm, []core.RouterTask, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+routerArmCols+` FROM router_arms ORDER BY task_type, model`)
	if err != nil {
		return nil, nil, fmt.Errorf("read router state: %w", err)
	}
	defer rows.Close()
	var arms []core.RouterArm
	for rows.Next() {
		var a core.RouterArm
		var probe, settled, change, upd int64
		if err := rows.Scan(&a.Task, &a.Model, &a.Drop.LLR, &a.Drop.Ref, &a.Drop.Pos, &a.Drop.Neg, &a.Rise.LLR, &a.Rise.Ref, &a.Rise.Pos, &a.Rise.Neg,
			&a.PoolPos, &a.PoolNeg, &a.Seq.Active, &a.Seq.P0, &a.Seq.P1, &a.Seq.LLR, &a.Seq.Pos, &a.Seq.Neg, &a.Seq.N, &a.Seq.Seen,
			&probe, &a.SettledVs, &settled, &change, &a.ChangeDir, &a.ChangeScope, &upd); err != nil {
			return nil, nil, fmt.Errorf("read router state: %w", err)
		}
		a.LastProbe, a.SettledAt, a.ChangeAt, a.UpdatedAt = msTime(probe), msTime(settled), msTime(change), msTime(upd)
		arms = append(arms, a)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read router state: %w", err)
	}
	trows, err := db.r.QueryContext(ctx, `SELECT `+routerTaskCols+` FROM router_tasks ORDER BY task_type`)
	if err != nil {
		return nil, nil, fmt.Errorf("read router task state: %w", err)
	}
	defer trows.Close()
	var tasks []core.RouterTask
	for trows.Next() {
		var t core.RouterTask
		var at, seen, upd int64
		if err := trows.Scan(&t.Task, &t.ProbeTokens, &t.ProbeCost, &t.Choices, &at, &seen, &t.Incumbent, &upd); err != nil {
			return nil, nil, fmt.Errorf("read router task state: %w", err)
		}
		t.ChoicesAt, t.FirstSeen, t.UpdatedAt = msTime(at), msTime(seen), msTime(upd)
		tasks = append(tasks, t)
	}
	return arms, tasks, trows.Err()
}

// ExploreSpentSince sums the cost of the probes (ledger purpose
// "explore") since a time: the exploration ledger that
// routing.explore.daily_usd counts against.
func (db *DB) ExploreSpentSince(ctx context.Context, since time.Time) (float64, error) {
	var sum float64
	err := db.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE at >= ? AND purpose = 'explore'`, since.UnixMilli()).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("sum exploration: %w", err)
	}
	return sum, nil
}

// ResetLearning deletes the learning state of the arms matching task
// and model ("" = any), as ResetAffinity does for their affinity.
func (db *DB) ResetLearning(ctx context.Context, task, model string) error {
	return db.tx(ctx, func(tx *txn) error { return resetLearning(ctx, tx, task, model) })
}

// resetLearning deletes the matching router_arms rows, and the
// router_tasks rows when every model of a task goes.
func resetLearning(ctx context.Context, tx *txn, task, model string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM router_arms WHERE (? = '' OR task_type = ?) AND (? = '' OR model = ?)`, task, task, model, model); err != nil {
		return fmt.Errorf("reset router state: %w", err)
	}
	if model == "" {
		if _, err := tx.ExecContext(ctx, `DELETE FROM router_tasks WHERE (? = '' OR task_type = ?)`, task, task); err != nil {
			return fmt.Errorf("reset router task state: %w", err)
		}
	}
	return nil
}

// UnjudgedReplies returns up to limit answers (replies written by a model
// for a task type) created in (after, before] that have no signal and no
// later reply in their session within within: nothing followed them.
// Only the fields the router needs are filled in (ID, RequestID,
// SessionID, Model, TaskType, CreatedAt).
func (db *DB) UnjudgedReplies(ctx context.Context, after, before time.Time, within time.Duration, limit int) ([]core.Reply, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT r.id, COALESCE(r.request_id, 0), r.session_id, r.model, r.task_type, r.created_at FROM replies r
		WHERE r.created_at > ? AND r.created_at <= ? AND r.model != '' AND r.task_type != ''
		AND NOT EXISTS (SELECT 1 FROM signals s WHERE s.reply_id = r.id)
		AND NOT EXISTS (SELECT 1 FROM replies n WHERE n.session_id = r.session_id AND n.id > r.id AND n.created_at < r.created_at + ?)
		ORDER BY r.id LIMIT ?`, after.UnixMilli(), before.UnixMilli(), within.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("unjudged replies: %w", err)
	}
	defer rows.Close()
	var out []core.Reply
	for rows.Next() {
		var r core.Reply
		var created int64
		if err := rows.Scan(&r.ID, &r.RequestID, &r.SessionID, &r.Model, &r.TaskType, &created); err != nil {
			return nil, fmt.Errorf("unjudged replies: %w", err)
		}
		r.CreatedAt = msTime(created)
		out = append(out, r)
	}
	return out, rows.Err()
}
