package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// msTime converts stored unix milliseconds (0 = unset) to a time.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// timeMS converts a time to unix milliseconds (zero = 0).
func timeMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// insertSignal records a signal once per (request, kind, reply): a
// retried queue item inserts nothing the second time.
const insertSignal = `INSERT INTO signals (at, kind, polarity, reply_id, model, task_type, user_id, weight, request_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id`

// signalArgs are the insertSignal arguments of s (its time defaults to now).
func (db *DB) signalArgs(s core.Signal) []any {
	at := s.At
	if at.IsZero() {
		at = db.now()
	}
	var reply, request any
	if s.ReplyID != 0 {
		reply = s.ReplyID
	}
	if s.RequestID != 0 {
		request = s.RequestID
	}
	return []any{at.UnixMilli(), string(s.Kind), int(s.Polarity), reply, s.Model, s.TaskType, s.UserID, s.Weight, request}
}

// AddSignal appends a quality signal and returns its id; 0 when the
// signal's request already recorded it.
func (db *DB) AddSignal(ctx context.Context, s core.Signal) (int64, error) {
	id, err := insertedID(db.w.QueryRowContext(ctx, insertSignal, db.signalArgs(s)...))
	if err != nil {
		return 0, fmt.Errorf("add signal: %w", err)
	}
	return id, nil
}

// insertedID is the id an INSERT ... ON CONFLICT DO NOTHING RETURNING id
// returned, 0 when it inserted none.
func insertedID(row *sql.Row) (int64, error) {
	var id int64
	if err := row.Scan(&id); errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	return id, nil
}

// SignalsForReply returns the signals recorded on one reply, oldest first.
func (db *DB) SignalsForReply(ctx context.Context, replyID int64) ([]core.Signal, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT at, kind, polarity, COALESCE(reply_id, 0), model, task_type, user_id, weight FROM signals WHERE reply_id = ? ORDER BY id`, replyID)
	if err != nil {
		return nil, fmt.Errorf("signals of reply %d: %w", replyID, err)
	}
	defer rows.Close()
	var out []core.Signal
	for rows.Next() {
		var s core.Signal
		var at int64
		var kind string
		var pol int
		if err := rows.Scan(&at, &kind, &pol, &s.ReplyID, &s.Model, &s.TaskType, &s.UserID, &s.Weight); err != nil {
			return nil, err
		}
		s.At, s.Kind, s.Polarity = msTime(at), core.SignalKind(kind), core.Polarity(pol)
		out = append(out, s)
	}
	return out, rows.Err()
}

const affinityCols = `task_type, model, pos, neg, positives, negatives, last_signal, updated_at`

func scanAffinity(row interface{ Scan(...any) error }) (core.Affinity, error) {
	var a core.Affinity
	var last, upd int64
	err := row.Scan(&a.Task, &a.Model, &a.Pos, &a.Neg, &a.Positives, &a.Negatives, &last, &upd)
	a.LastSignal, a.UpdatedAt = msTime(last), msTime(upd)
	return a, err
}

// UpdateAffinity replaces the (task, model) row by fn(current) in one
// transaction; a missing row is passed as a zero row.
func (db *DB) UpdateAffinity(ctx context.Context, task, model string, fn func(core.Affinity) core.Affinity) error {
	return db.txLocking(ctx, func(tx *txn) error { return updateAffinity(ctx, tx, task, model, fn) })
}

// AddSignalAndAffinity is AddSignal and UpdateAffinity in one
// transaction (one commit instead of two on every judged message). A
// signal its request already recorded changes nothing: it returns 0 and
// fn is not called.
func (db *DB) AddSignalAndAffinity(ctx context.Context, s core.Signal, task, model string, fn func(core.Affinity) core.Affinity) (int64, error) {
	var id int64
	err := db.txLocking(ctx, func(tx *txn) error {
		var err error
		if id, err = insertedID(tx.QueryRowContext(ctx, insertSignal, db.signalArgs(s)...)); err != nil {
			return fmt.Errorf("add signal: %w", err)
		}
		if id == 0 {
			return nil
		}
		return updateAffinity(ctx, tx, task, model, fn)
	})
	return id, err
}

// An affinity row is folded under its row lock. On PostgreSQL the
// transactions that fold run READ COMMITTED and read the row FOR UPDATE:
// a concurrent fold of the same row (every judged message folds into its
// task and model's one row) waits for the lock, then reads what the
// other wrote. SERIALIZABLE aborted all but one of them instead: at 200
// messages a second on one model, about one reply transaction in ten lost
// ten times in a row and its request ran again, LLM call and all.

// updateAffinity replaces the (task, model) row by fn(current), the row
// read locked; a missing row is passed as a zero row.
func updateAffinity(ctx context.Context, tx *txn, task, model string, fn func(core.Affinity) core.Affinity) error {
	for {
		a, found, err := lockAffinity(ctx, tx, task, model)
		if err != nil {
			return err
		}
		stored, err := storeAffinity(ctx, tx, task, model, fn(a), found)
		if err != nil || stored {
			return err
		}
		// Another transaction created the row meanwhile: fold into it.
	}
}

// lockAffinity reads the (task, model) row, locking it until the
// transaction ends (on PostgreSQL); found is false when there is none
// (a zero row is returned).
func lockAffinity(ctx context.Context, tx *txn, task, model string) (a core.Affinity, found bool, err error) {
	a, err = scanAffinity(tx.QueryRowContext(ctx, `SELECT `+affinityCols+` FROM affinity WHERE task_type = ? AND model = ?`+tx.p.d.forUpdate, task, model))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Affinity{Task: task, Model: model}, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("read affinity %s/%s: %w", task, model, err)
	}
	return a, true, nil
}

// storeAffinity writes a as the (task, model) row (whatever key a
// holds), folded from the row read locked (found) or from none. A new row
// is inserted only while there is none: stored is false when another
// transaction created it first (the fold must then be made again from
// that row).
func storeAffinity(ctx context.Context, tx *txn, task, model string, a core.Affinity, found bool) (stored bool, err error) {
	args := []any{a.Pos, a.Neg, a.Positives, a.Negatives, timeMS(a.LastSignal), timeMS(a.UpdatedAt), task, model}
	if found {
		_, err = tx.ExecContext(ctx, `UPDATE affinity SET pos = ?, neg = ?, positives = ?, negatives = ?, last_signal = ?, updated_at = ?
			WHERE task_type = ? AND model = ?`, args...)
	} else {
		var res sql.Result
		res, err = tx.ExecContext(ctx, `INSERT INTO affinity (pos, neg, positives, negatives, last_signal, updated_at, task_type, model)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_type, model) DO NOTHING`, args...)
		if err == nil {
			var n int64
			n, err = res.RowsAffected()
			found = n == 1
		}
	}
	if err != nil {
		return false, fmt.Errorf("write affinity %s/%s: %w", task, model, err)
	}
	return found, nil
}

// Affinities returns every affinity row ordered by task and model.
func (db *DB) Affinities(ctx context.Context) ([]core.Affinity, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+affinityCols+` FROM affinity ORDER BY task_type, model`)
	if err != nil {
		return nil, fmt.Errorf("read affinity: %w", err)
	}
	defer rows.Close()
	var out []core.Affinity
	for rows.Next() {
		a, err := scanAffinity(rows)
		if err != nil {
			return nil, fmt.Errorf("read affinity: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ResetAffinity deletes the rows matching task and model ("" = any) and
// reports how many went. The router's learning state of the same arms
// (router_arms, and router_tasks when every model of a task goes) goes
// with them, in the same transaction: a detector run or a settled mark
// left behind would otherwise judge the fresh evidence against the old.
func (db *DB) ResetAffinity(ctx context.Context, task, model string) (int64, error) {
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM affinity WHERE (? = '' OR task_type = ?) AND (? = '' OR model = ?)`, task, task, model, model)
		if err != nil {
			return fmt.Errorf("reset affinity: %w", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("reset affinity: %w", err)
		}
		return resetLearning(ctx, tx, task, model)
	})
	return n, err
}

// ProfileStates returns the state of every auth profile seen so far.
func (db *DB) ProfileStates(ctx context.Context) ([]core.ProfileState, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT provider, id, uses, last_used, cooldown_until, last_probe, failures, billing_failures, last_error, retry_after FROM profiles ORDER BY provider, id`)
	if err != nil {
		return nil, fmt.Errorf("read profile state: %w", err)
	}
	defer rows.Close()
	var out []core.ProfileState
	for rows.Next() {
		var p core.ProfileState
		var used, cool, probe, retry int64
		if err := rows.Scan(&p.Provider, &p.ID, &p.Uses, &used, &cool, &probe, &p.Failures, &p.BillingFailures, &p.LastError, &retry); err != nil {
			return nil, fmt.Errorf("read profile state: %w", err)
		}
		p.LastUsed, p.CooldownUntil, p.LastProbe = msTime(used), msTime(cool), msTime(probe)
		p.RetryAfter = time.Duration(retry) * time.Millisecond
		out = append(out, p)
	}
	return out, rows.Err()
}

// SaveProfileState saves one profile's state as a change, merged with
// what other replicas saved (one statement, no lost update): a cooldown
// only moves later (with the failures and error that set it) unless the
// change is a success (no failures, no cooldown: the credential works,
// and its cooldown ends); uses and times only grow. The server's
// Retry-After goes with the cooldown it set.
func (db *DB) SaveProfileState(ctx context.Context, p core.ProfileState) error {
	p.LastError = core.CleanText(p.LastError) // as a queue item's cause (Finish)
	g := db.d.greatest
	_, err := db.w.ExecContext(ctx, `INSERT INTO profiles (provider, id, uses, last_used, cooldown_until, last_probe, failures, billing_failures, last_error, retry_after)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET provider = excluded.provider,
		uses = `+g+`(profiles.uses, excluded.uses),
		last_used = `+g+`(profiles.last_used, excluded.last_used),
		last_probe = `+g+`(profiles.last_probe, excluded.last_probe),
		cooldown_until = CASE WHEN excluded.failures = 0 AND excluded.billing_failures = 0 AND excluded.cooldown_until = 0 THEN 0
			ELSE `+g+`(profiles.cooldown_until, excluded.cooldown_until) END,
		failures = CASE WHEN excluded.cooldown_until >= profiles.cooldown_until OR excluded.failures = 0 AND excluded.billing_failures = 0 AND excluded.cooldown_until = 0
			THEN excluded.failures ELSE profiles.failures END,
		billing_failures = CASE WHEN excluded.cooldown_until >= profiles.cooldown_until OR excluded.failures = 0 AND excluded.billing_failures = 0 AND excluded.cooldown_until = 0
			THEN excluded.billing_failures ELSE profiles.billing_failures END,
		last_error = CASE WHEN excluded.cooldown_until >= profiles.cooldown_until OR excluded.failures = 0 AND excluded.billing_failures = 0 AND excluded.cooldown_until = 0
			THEN excluded.last_error ELSE profiles.last_error END,
		retry_after = CASE WHEN excluded.cooldown_until >= profiles.cooldown_until OR excluded.failures = 0 AND excluded.billing_failures = 0 AND excluded.cooldown_until = 0
			THEN excluded.retry_after ELSE profiles.retry_after END`,
		p.Provider, p.ID, p.Uses, timeMS(p.LastUsed), timeMS(p.CooldownUntil), timeMS(p.LastProbe), p.Failures, p.BillingFailures, p.LastError, p.RetryAfter.Milliseconds())
	if err != nil {
		return fmt.Errorf("save profile state %s: %w", p.ID, err)
	}
	return nil
}

// AddUsage appends one LLM call to the cost ledger.
func (db *DB) AddUsage(ctx context.Context, u core.UsageRecord) error {
	if _, err := db.w.ExecContext(ctx, insertUsage, db.usageArgs(u)...); err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	return nil
}

const insertUsage = insertUsageInto + ` VALUES ` + usageRow

// insertUsageInto and usageRow are insertUsage's parts (usageAndSignal
// writes several rows).
const (
	insertUsageInto = `INSERT INTO usage (at, session_id, conversation, user_id, model, purpose, input_tokens, output_tokens, cost_usd)`
	usageRow        = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// usageArgs are the insertUsage arguments of u.
func (db *DB) usageArgs(u core.UsageRecord) []any {
	at := u.At
	if at.IsZero() {
		at = db.now()
	}
	var sess any
	if u.SessionID != 0 {
		sess = u.SessionID
	}
	purpose := u.Purpose
	if purpose == "" {
		purpose = "chat"
	}
	return []any{at.UnixMilli(), sess, u.Conversation, u.UserID, u.Model, purpose, u.InputTokens, u.OutputTokens, u.CostUSD}
}

// usagePerStatement bounds the usage rows written in usageAndSignal's
// statement (and so the statements prepared for it).
const usagePerStatement = 4

// usageAndSignal writes, on PostgreSQL, the usage rows and the signal s
// and reads the affinity row s folds into, locked as lockAffinity does,
// in one statement (one round trip instead of one per row, the signal's
// and the affinity's read): the signal's id (0: its request recorded it
// already; nothing is read then) and the affinity row, found (a zero row
// of s's task and model when there is none).
func (db *DB) usageAndSignal(ctx context.Context, tx *txn, usage []core.UsageRecord, s core.DeferredSignal) (int64, core.Affinity, bool, error) {
	var q strings.Builder
	var args []any
	q.WriteString(`WITH `)
	if len(usage) > 0 {
		q.WriteString(`u AS (` + insertUsageInto + ` VALUES `)
		for i, u := range usage {
			if i > 0 {
				q.WriteString(`, `)
			}
			q.WriteString(usageRow)
			args = append(args, db.usageArgs(u)...)
		}
		q.WriteString(`), `)
	}
	q.WriteString(`s AS (` + insertSignal + `),
		a AS (SELECT ` + affinityCols + ` FROM affinity WHERE task_type = ? AND model = ? FOR UPDATE)
		SELECT s.id, a.task_type IS NOT NULL, COALESCE(a.pos, 0), COALESCE(a.neg, 0), COALESCE(a.positives, 0), COALESCE(a.negatives, 0),
			COALESCE(a.last_signal, 0), COALESCE(a.updated_at, 0)
		FROM s LEFT JOIN a ON TRUE`)
	args = append(append(args, db.signalArgs(s.Signal)...), s.Task, s.Model)
	a := core.Affinity{Task: s.Task, Model: s.Model}
	var id, last, upd int64
	var found bool
	err := tx.QueryRowContext(ctx, q.String(), args...).Scan(&id, &found, &a.Pos, &a.Neg, &a.Positives, &a.Negatives, &last, &upd)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, a, false, nil // recorded already (the usage rows are written)
	}
	if err != nil {
		return 0, a, false, fmt.Errorf("add usage and signal: %w", err)
	}
	if found {
		a.LastSignal, a.UpdatedAt = msTime(last), msTime(upd)
	}
	return id, a, found, nil
}

// deferredWrites is what one transaction wrote of a core.Deferred.
type deferredWrites struct {
	usage   int
	signals []core.DeferredSignal
	ids     []int64
}

// writeDeferred writes what d holds in tx: its usage rows, then its
// signals with their affinity folds. The caller reports them written
// (done) once tx committed.
func (db *DB) writeDeferred(ctx context.Context, tx *txn, d *core.Deferred) (deferredWrites, error) {
	usage, signals := d.Pending()
	w := deferredWrites{usage: len(usage), signals: signals, ids: make([]int64, len(signals))}
	first := 0 // the signals written with the usage rows
	if db.d.concurrent && len(signals) > 0 && len(usage) <= usagePerStatement {
		id, a, found, err := db.usageAndSignal(ctx, tx, usage, signals[0])
		if err != nil {
			return w, err
		}
		w.ids[0], first = id, 1
		if s := signals[0]; id != 0 && s.Fold != nil {
			stored, err := storeAffinity(ctx, tx, s.Task, s.Model, s.Fold(a), found)
			if err == nil && !stored {
				err = updateAffinity(ctx, tx, s.Task, s.Model, s.Fold)
			}
			if err != nil {
				return w, err
			}
		}
		if id != 0 {
			if err := writeLearning(ctx, tx, signals[0].Arms, signals[0].Tasks); err != nil {
				return w, err
			}
		}
	} else {
		for _, u := range usage {
			if _, err := tx.ExecContext(ctx, insertUsage, db.usageArgs(u)...); err != nil {
				return w, fmt.Errorf("add usage: %w", err)
			}
		}
	}
	for i, s := range signals[first:] {
		i += first
		id, err := insertedID(tx.QueryRowContext(ctx, insertSignal, db.signalArgs(s.Signal)...))
		if err != nil {
			return w, fmt.Errorf("add signal: %w", err)
		}
		w.ids[i] = id
		if id != 0 && s.Fold != nil {
			if err := updateAffinity(ctx, tx, s.Task, s.Model, s.Fold); err != nil {
				return w, err
			}
		}
		if id != 0 {
			if err := writeLearning(ctx, tx, s.Arms, s.Tasks); err != nil {
				return w, err
			}
		}
	}
	return w, nil
}

// done reports the writes committed to d.
func (w deferredWrites) done(d *core.Deferred) {
	if d != nil && (w.usage > 0 || len(w.signals) > 0) {
		d.Written(w.usage, w.signals, w.ids)
	}
}

var _ core.DeferredWriter = (*DB)(nil)

// WriteDeferred implements core.DeferredWriter: what is left of d, in one
// transaction; no round trip when nothing is.
func (db *DB) WriteDeferred(ctx context.Context, d *core.Deferred) error {
	if u, s := d.Pending(); len(u) == 0 && len(s) == 0 {
		return nil
	}
	var w deferredWrites
	err := db.txLocking(ctx, func(tx *txn) error {
		var err error
		w, err = db.writeDeferred(ctx, tx, d)
		return err
	})
	if err != nil {
		return fmt.Errorf("deferred writes: %w", err)
	}
	w.done(d)
	return nil
}

// SpentSince sums cost since a time for one conversation ("" = all).
func (db *DB) SpentSince(ctx context.Context, since time.Time, conversation string) (float64, error) {
	var sum float64
	err := db.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0) FROM usage WHERE at >= ? AND (? = '' OR conversation = ?)`,
		since.UnixMilli(), conversation, conversation).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("sum usage: %w", err)
	}
	return sum, nil
}

// usageGroups are the columns UsageTotals may group by.
var usageGroups = map[string]string{"model": "model", "chat": "conversation", "user": "user_id", "purpose": "purpose", "session": "CAST(session_id AS TEXT)"}

// UsageTotals sums the ledger since a time, grouped by "model", "chat",
// "user", "purpose" or "session", most expensive first. conversation
// narrows it to one conversation ("" = all).
func (db *DB) UsageTotals(ctx context.Context, since time.Time, by, conversation string) ([]core.UsageTotal, error) {
	col, ok := usageGroups[by]
	if !ok {
		return nil, core.Errorf(core.KindInvalid, "cannot group usage by %q; use model, chat, user, purpose or session", by)
	}
	rows, err := db.r.QueryContext(ctx, `SELECT COALESCE(`+col+`, ''), COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd)
		FROM usage WHERE at >= ? AND (? = '' OR conversation = ?) GROUP BY 1 ORDER BY 5 DESC, 1`, since.UnixMilli(), conversation, conversation)
	if err != nil {
		return nil, fmt.Errorf("usage totals: %w", err)
	}
	defer rows.Close()
	var out []core.UsageTotal
	for rows.Next() {
		var t core.UsageTotal
		if err := rows.Scan(&t.Key, &t.Calls, &t.InputTokens, &t.OutputTokens, &t.CostUSD); err != nil {
			return nil, fmt.Errorf("usage totals: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// LastAnswer returns the newest reply of a session written by a model
// (command replies have no model); nil when there is none.
func (db *DB) LastAnswer(ctx context.Context, sessionID int64) (*core.Reply, error) {
	return db.reply(ctx, `session_id = ? AND model != '' ORDER BY id DESC LIMIT 1`, sessionID)
}
