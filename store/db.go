package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// FileName is the database file inside the data directory.
const FileName = "opentalon.db"

// Options configure Open.
type Options struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// SessionTTL ends a session idle for longer (0 = never).
	SessionTTL time.Duration
	// QueueRetention is how long finished (done or failed) queue rows are
	// kept, and so how long a redelivered platform event is recognized
	// as a duplicate (state.retention; 0 = forever).
	QueueRetention time.Duration
	// ReadConns bounds the read pool (default 4).
	ReadConns int
	Logger    *slog.Logger
}

// DB is the open database: one writer connection with immediate
// transactions and a read pool. Safe for concurrent use.
type DB struct {
	w    *pool
	r    *pool
	now  func() time.Time
	ttl  time.Duration
	keep time.Duration
	path string
	log  *slog.Logger
	// syncFile flushes a file to the disk (fsync); tests replace it.
	syncFile func(path string) error
}

// Open opens (creating if needed) <dataDir>/opentalon.db and migrates it.
func Open(ctx context.Context, dataDir string, o Options) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s (state.data_dir): %w", dataDir, err)
	}
	return OpenFile(ctx, filepath.Join(dataDir, FileName), o)
}

// OpenFile opens the database at path and migrates it.
func OpenFile(ctx context.Context, path string, o Options) (*DB, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// SQLite would create the file with the umask's mode (often 0644) and
	// give its -wal and -shm files the same; it holds the conversations.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create database %s (state.data_dir): %w", path, err)
	}
	pragmas := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		pragmas.Add("_pragma", p)
	}
	base := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas.Encode()
	wdb, err := sql.Open("sqlite", base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w := newPool(wdb)
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db := &DB{w: w, now: o.Now, ttl: o.SessionTTL, keep: o.QueueRetention, path: path, log: o.Logger, syncFile: fsync}
	if err := db.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(o.ReadConns)
	r.SetMaxIdleConns(o.ReadConns)
	db.r = newPool(r)
	return db, nil
}

// Path is the database file.
func (db *DB) Path() string { return db.path }

// Ping checks the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error { return db.r.PingContext(ctx) }

// Close closes both pools.
func (db *DB) Close() error {
	var errs []error
	if db.r != nil {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	return errors.Join(errs...)
}

func (db *DB) ms() int64 { return db.now().UnixMilli() }

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s: name must start with a number and '_'", e.Name())
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a number", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// migrate applies the embedded migrations not yet recorded, each in its
// own transaction, and refuses a database written by a newer version.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	// One-off queries bypass the statement cache (db.w.DB).
	if _, err := db.w.DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("open database %s: %w", db.path, err)
	}
	var have int
	if err := db.w.DB.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("read schema version of %s: %w", db.path, err)
	}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	if have > latest {
		return fmt.Errorf("database %s has schema version %d but this opentalon knows only up to %d: it was written by a newer release; upgrade opentalon, or set state.data_dir to another directory", db.path, have, latest)
	}
	applied := map[int]bool{}
	rows, err := db.w.DB.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied[v] = true
	}
	rows.Close()
	var names []string
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if err := db.tx(ctx, func(tx *txn) error {
			if _, err := tx.Tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, m.version, m.name, db.ms())
			return err
		}); err != nil {
			return fmt.Errorf("apply migration %s to %s: %w", m.name, db.path, err)
		}
		db.log.Debug("applied database migration", "migration", m.name)
		names = append(names, m.name)
	}
	switch {
	case len(names) == 0:
	case have == 0:
		db.log.Info("created the database", "path", db.path, "schema_version", latest)
	default:
		db.log.Info("migrated the database", "path", db.path, "from_version", have, "to_version", latest, "migrations", len(names))
	}
	return nil
}

// tx runs fn in an immediate write transaction. Queries fn meets for the
// first time are prepared for the next transactions once it ends.
func (db *DB) tx(ctx context.Context, fn func(*txn) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if tx.missed {
			db.w.prepareWanted(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
