package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opentalon/opentalon/core"
)

const scheduleCols = `id, source, key, interval_ms, cron, spec, prompt, plugin, action, args, channel, chat, thread, model, timezone, missed, creator, private, created_at, last_fire, next_fire`

func scanSchedule(sc interface{ Scan(...any) error }) (core.Schedule, error) {
	var s core.Schedule
	var interval, created, last, next int64
	var args string
	err := sc.Scan(&s.ID, &s.Source, &s.Key, &interval, &s.Cron, &s.Spec, &s.Prompt, &s.Plugin, &s.Action, &args,
		&s.Conversation.Channel, &s.Conversation.Chat, &s.Conversation.Thread, &s.Model, &s.Timezone, &s.Missed, &s.Creator, &s.Private, &created, &last, &next)
	if err != nil {
		return s, err
	}
	s.Interval = time.Duration(interval) * time.Millisecond
	if args != "" && args != "{}" {
		if err := json.Unmarshal([]byte(args), &s.Args); err != nil {
			return s, fmt.Errorf("schedule %d: args: %w", s.ID, err)
		}
	}
	s.CreatedAt = time.UnixMilli(created)
	if last > 0 {
		s.LastFire = time.UnixMilli(last)
	}
	if next > 0 {
		s.NextFire = time.UnixMilli(next)
	}
	return s, nil
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// asStored is t as the schedules table keeps it: to the millisecond, as
// scanSchedule reads it back (zero stays zero).
func asStored(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli())
}

// Schedules returns every schedule, oldest first.
func (db *DB) Schedules(ctx context.Context) ([]core.Schedule, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+scheduleCols+` FROM schedules ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read schedules: %w", err)
	}
	defer rows.Close()
	var out []core.Schedule
	for rows.Next() {
		s, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("read schedules: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// AddSchedule stores a new schedule and returns it with its id, its
// times as stored (to the millisecond).
func (db *DB) AddSchedule(ctx context.Context, s core.Schedule) (core.Schedule, error) {
	var err error
	err = db.tx(ctx, func(tx *txn) error {
		s, err = insertSchedule(ctx, tx, s, db.now())
		return err
	})
	if err != nil {
		return s, fmt.Errorf("add schedule: %w", err)
	}
	return s, nil
}

func insertSchedule(ctx context.Context, tx *txn, s core.Schedule, now time.Time) (core.Schedule, error) {
	if s.Source == "" || s.Conversation.Channel == "" || s.Conversation.Chat == "" {
		return s, core.Errorf(core.KindInvalid, "schedule: source, channel and chat are required")
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	args := "{}"
	if len(s.Args) > 0 {
		b, err := json.Marshal(s.Args)
		if err != nil {
			return s, err
		}
		args = string(b)
	}
	if s.Missed == "" {
		s.Missed = core.MissedSkip
	}
	// A prompt is a user's or a plugin's text: PostgreSQL refuses NUL
	// and broken UTF-8.
	s.Spec, s.Prompt = core.CleanText(s.Spec), core.CleanText(s.Prompt)
	err := tx.QueryRowContext(ctx, `INSERT INTO schedules (source, key, interval_ms, cron, spec, prompt, plugin, action, args, channel, chat, thread, model, timezone, missed, creator, private, created_at, last_fire, next_fire)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		s.Source, s.Key, s.Interval.Milliseconds(), s.Cron, s.Spec, s.Prompt, s.Plugin, s.Action, args,
		s.Conversation.Channel, s.Conversation.Chat, s.Conversation.Thread, s.Model, s.Timezone, s.Missed, s.Creator, s.Private,
		s.CreatedAt.UnixMilli(), msOrZero(s.LastFire), msOrZero(s.NextFire)).Scan(&s.ID)
	// Returned as stored: a time finer than the table's (the system
	// clock's nanoseconds) would not equal the one read back, and the
	// scheduler's compare of the two would take its own schedule for one
	// changed elsewhere and never fire it.
	s.CreatedAt, s.LastFire, s.NextFire = asStored(s.CreatedAt), asStored(s.LastFire), asStored(s.NextFire)
	return s, err
}

// sameTiming says two versions of a schedule fire at the same times, so
// the stored one keeps its next and last firing.
func sameTiming(a, b core.Schedule) bool {
	return a.Interval == b.Interval && a.Cron == b.Cron && a.Timezone == b.Timezone
}

// SyncSchedules makes the schedules of source exactly want, matched by
// Key: a schedule whose Key and timing are unchanged keeps its id,
// creation time and firing state (its other fields are updated); a new
// or re-timed one is stored as given (NextFire computed by the caller);
// the rest of source's schedules are deleted. It returns source's
// schedules as stored.
func (db *DB) SyncSchedules(ctx context.Context, source string, want []core.Schedule) ([]core.Schedule, error) {
	var out []core.Schedule
	err := db.tx(ctx, func(tx *txn) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE source = ?`, source)
		if err != nil {
			return err
		}
		have := map[string]core.Schedule{}
		for rows.Next() {
			s, err := scanSchedule(rows)
			if err != nil {
				rows.Close()
				return err
			}
			have[s.Key] = s
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, w := range want {
			w.Source = source
			if w.Key == "" {
				return core.Errorf(core.KindInvalid, "sync schedules of %s: a schedule has no key", source)
			}
			old, ok := have[w.Key]
			delete(have, w.Key)
			if ok && sameTiming(old, w) {
				w.ID, w.CreatedAt, w.LastFire, w.NextFire = old.ID, old.CreatedAt, old.LastFire, old.NextFire
				args := "{}"
				if len(w.Args) > 0 {
					b, _ := json.Marshal(w.Args)
					args = string(b)
				}
				if w.Missed == "" {
					w.Missed = core.MissedSkip
				}
				w.Spec, w.Prompt = core.CleanText(w.Spec), core.CleanText(w.Prompt) // as insertSchedule
				if _, err := tx.ExecContext(ctx, `UPDATE schedules SET spec = ?, prompt = ?, plugin = ?, action = ?, args = ?, channel = ?, chat = ?, thread = ?, model = ?, missed = ?, creator = ? WHERE id = ?`,
					w.Spec, w.Prompt, w.Plugin, w.Action, args, w.Conversation.Channel, w.Conversation.Chat, w.Conversation.Thread, w.Model, w.Missed, w.Creator, w.ID); err != nil {
					return err
				}
				out = append(out, w)
				continue
			}
			if ok {
				if _, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, old.ID); err != nil {
					return err
				}
			}
			s, err := insertSchedule(ctx, tx, w, db.now())
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		for _, old := range have {
			if _, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, old.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sync schedules of %s: %w", source, err)
	}
	return out, nil
}

// DeleteSchedule removes a schedule; an unknown id is a KindNotFound
// error.
func (db *DB) DeleteSchedule(ctx context.Context, id int64) error {
	res, err := db.w.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete schedule %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.Errorf(core.KindNotFound, "no schedule #%d", id)
	}
	return nil
}

// ScheduleFired records a schedule's last queued firing (zero keeps the
// stored one) and its next firing time (zero with a last firing keeps
// the stored one).
func (db *DB) ScheduleFired(ctx context.Context, id int64, last, next time.Time) error {
	var err error
	switch {
	case last.IsZero():
		_, err = db.w.ExecContext(ctx, `UPDATE schedules SET next_fire = ? WHERE id = ?`, msOrZero(next), id)
	case next.IsZero():
		// The scheduler moved next_fire already (AdvanceSchedule); only a
		// later firing is recorded.
		_, err = db.w.ExecContext(ctx, `UPDATE schedules SET last_fire = ? WHERE id = ? AND last_fire < ?`, last.UnixMilli(), id, last.UnixMilli())
	default:
		_, err = db.w.ExecContext(ctx, `UPDATE schedules SET last_fire = ?, next_fire = ? WHERE id = ?`, last.UnixMilli(), msOrZero(next), id)
	}
	if err != nil {
		return fmt.Errorf("record firing of schedule %d: %w", id, err)
	}
	return nil
}

// Schedule returns one schedule; an unknown id is a KindNotFound error.
func (db *DB) Schedule(ctx context.Context, id int64) (core.Schedule, error) {
	s, err := scanSchedule(db.r.QueryRowContext(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return s, core.Errorf(core.KindNotFound, "no schedule #%d", id)
	}
	if err != nil {
		return s, fmt.Errorf("read schedule %d: %w", id, err)
	}
	return s, nil
}

// SchedulesVersion is a counter every change to the schedules bumps
// (migration 131): the scheduler reads them again when it moved.
func (db *DB) SchedulesVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := db.r.QueryRowContext(ctx, `SELECT version FROM schedule_version WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read the schedules' version: %w", err)
	}
	return v, nil
}

// AdvanceSchedule moves a schedule's next firing from at to next, only
// when it is still at: a compare-and-set, so of two schedulers firing the
// same due time (a leader and the one taking over) one moves it, and a
// schedule deleted or re-timed meanwhile is not fired. moved says whether
// it did.
func (db *DB) AdvanceSchedule(ctx context.Context, id int64, at, next time.Time) (bool, error) {
	res, err := db.w.ExecContext(ctx, `UPDATE schedules SET next_fire = ? WHERE id = ? AND next_fire = ?`, msOrZero(next), id, msOrZero(at))
	if err != nil {
		return false, fmt.Errorf("advance schedule %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("advance schedule %d: %w", id, err)
	}
	return n == 1, nil
}
