package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/opentalon/opentalon/core"
)

// What operators read: the metrics and the status page (scraped while the
// gateway runs, so every query here is on the read pool), and the
// database checks and backups of `opentalon doctor` and `backup`.

// OldestQueued returns when the oldest queued row was accepted (zero when
// nothing is queued).
func (db *DB) OldestQueued(ctx context.Context) (time.Time, error) {
	var ms sql.NullInt64
	if err := db.r.QueryRowContext(ctx, `SELECT MIN(created_at) FROM queue WHERE status = 'queued'`).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("oldest queued item: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms.Int64), nil
}

// UsageByModelAfter sums, by model, the usage ledger rows with an id past
// after; last is the highest id summed (after when there are none). Rows
// are never deleted and commit in id order, so adding each call's rows
// to the previous sums keeps running totals.
func (db *DB) UsageByModelAfter(ctx context.Context, after int64) ([]core.UsageTotal, int64, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_usd), 0), MAX(id)
		FROM usage WHERE id > ? GROUP BY model ORDER BY model`, after)
	if err != nil {
		return nil, after, fmt.Errorf("usage by model: %w", err)
	}
	defer rows.Close()
	var out []core.UsageTotal
	last := after
	for rows.Next() {
		var t core.UsageTotal
		var maxID int64
		if err := rows.Scan(&t.Key, &t.Calls, &t.InputTokens, &t.OutputTokens, &t.CostUSD, &maxID); err != nil {
			return nil, after, fmt.Errorf("usage by model: %w", err)
		}
		last = max(last, maxID)
		out = append(out, t)
	}
	return out, last, rows.Err()
}

// UsageSeries sums the ledger since since in buckets of width step, by
// "model" or "channel" (the platform of the call's conversation; "" for a
// call outside one).
func (db *DB) UsageSeries(ctx context.Context, since time.Time, step time.Duration, by string) ([]core.UsagePoint, error) {
	var key string
	switch by {
	case "model":
		key = "model"
	case "channel":
		pos := db.d.strpos + "(conversation, ':')"
		key = "CASE WHEN " + pos + " > 0 THEN substr(conversation, 1, " + pos + " - 1) ELSE conversation END"
	default:
		return nil, core.Errorf(core.KindInvalid, "usage series by %q: use model or channel", by)
	}
	if step < time.Second {
		return nil, core.Errorf(core.KindInvalid, "usage series: step %s is below a second", step)
	}
	from, width := since.UnixMilli(), step.Milliseconds()
	rows, err := db.r.QueryContext(ctx, `SELECT (at - ?) / ? AS b, `+key+` AS k, COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_usd), 0)
		FROM usage WHERE at >= ? GROUP BY b, k ORDER BY b, k`, from, width, from)
	if err != nil {
		return nil, fmt.Errorf("usage series: %w", err)
	}
	defer rows.Close()
	var out []core.UsagePoint
	for rows.Next() {
		var p core.UsagePoint
		var b int64
		if err := rows.Scan(&b, &p.Key, &p.Calls, &p.InputTokens, &p.OutputTokens, &p.CostUSD); err != nil {
			return nil, fmt.Errorf("usage series: %w", err)
		}
		p.Bucket = time.UnixMilli(from + b*width)
		out = append(out, p)
	}
	return out, rows.Err()
}

// RecentFailures returns the latest failed queue rows, newest first.
func (db *DB) RecentFailures(ctx context.Context, limit int) ([]core.QueueFailure, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, conversation, kind, last_error, updated_at FROM queue
		WHERE status = 'failed' ORDER BY updated_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("recent failures: %w", err)
	}
	defer rows.Close()
	var out []core.QueueFailure
	for rows.Next() {
		var f core.QueueFailure
		var conv string
		var at int64
		if err := rows.Scan(&f.ID, &conv, &f.Kind, &f.Reason, &at); err != nil {
			return nil, fmt.Errorf("recent failures: %w", err)
		}
		f.Channel, f.At = core.ParseConversationKey(conv).Channel, time.UnixMilli(at)
		out = append(out, f)
	}
	return out, rows.Err()
}

// QuickCheck checks the database and returns what it found wrong (nil
// when it is sound): SQLite's PRAGMA quick_check; on PostgreSQL, whose
// server keeps its own files sound, that every table of the schema is
// there and readable.
func (db *DB) QuickCheck(ctx context.Context) ([]string, error) {
	if db.d.concurrent {
		return db.checkTables(ctx)
	}
	rows, err := db.r.QueryContext(ctx, `PRAGMA quick_check`)
	if err != nil {
		return nil, fmt.Errorf("quick_check %s: %w", db.path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	return problems, rows.Err()
}

// ErrBackupWithPgDump says a PostgreSQL database is backed up with the
// server's own tool, not by opentalon.
var ErrBackupWithPgDump = core.Errorf(core.KindInvalid, "a PostgreSQL database is backed up with pg_dump (pg_dump --format=custom --file=opentalon.dump \"$OPENTALON_POSTGRES_DSN\"; restore with pg_restore), or with the server's own backups; opentalon backup copies the SQLite file of state.driver: sqlite")

// Backup writes a consistent copy of the database to path with VACUUM
// INTO: one read transaction, so the copy is a snapshot even while the
// gateway writes. path must not exist yet. On PostgreSQL it returns
// ErrBackupWithPgDump.
func (db *DB) Backup(ctx context.Context, path string) error {
	if db.d.concurrent {
		return ErrBackupWithPgDump
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err == nil {
		return core.Errorf(core.KindInvalid, "backup: %s already exists; name a new file", abs)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup to %s: %w", abs, err)
	}
	// VACUUM INTO is refused on a query_only connection: it runs on a
	// connection of its own, outside the writer's.
	conn, err := sql.Open("sqlite", "file:"+(&url.URL{Path: db.path}).EscapedPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup %s: %w", db.path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		os.Remove(abs)
		return fmt.Errorf("backup %s to %s: %w", db.path, abs, err)
	}
	return os.Chmod(abs, 0o600)
}

// checkTables reads one row of every table the migrations created, so a
// table dropped or unreadable (permissions) is named.
func (db *DB) checkTables(ctx context.Context) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", db.name, err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return nil, err
		}
		have[t] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var problems []string
	for _, t := range append(slices.Clone(Tables), "queue_heads", "plugin_state_usage", "lua_kv_usage", "leases", "schedule_version", "replicas", "notices", "schema_migrations") {
		if !have[t] {
			problems = append(problems, fmt.Sprintf("table %s is missing", t))
			continue
		}
		var one int
		if err := db.r.DB.QueryRowContext(ctx, `SELECT 1 FROM `+t+` LIMIT 1`).Scan(&one); err != nil && !errors.Is(err, sql.ErrNoRows) {
			problems = append(problems, fmt.Sprintf("table %s cannot be read: %v", t, err))
		}
	}
	return problems, nil
}

// Tables are the tables of the schema that hold data, parents before
// the tables that refer to them (the order `state migrate` copies them
// in). Triggers fill queue_heads, plugin_state_usage and lua_kv_usage;
// leases are the running replicas' and are not copied.
var Tables = []string{
	"sessions", "messages", "replies", "deliveries", "usage", "signals", "affinity", "profiles", "escalations", "router_arms", "router_tasks",
	"plugin_binding", "plugin_state", "lua_kv", "memories", "pairings", "settings", "schedules", "media", "media_sources",
	"queue",
}

// ServerVersion is the engine's version: the PostgreSQL server's, or
// SQLite's library.
func (db *DB) ServerVersion(ctx context.Context) (string, error) {
	q := `SELECT sqlite_version()`
	if db.d.concurrent {
		q = `SELECT current_setting('server_version')`
	}
	var v string
	err := db.r.QueryRowContext(ctx, q).Scan(&v)
	return v, err
}
