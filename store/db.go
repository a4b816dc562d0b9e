package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/opentalon/opentalon/core"
)

//go:embed migrations/*.sql migrations_pg/*.sql
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
	// ReadConns bounds the read pool (default 4; SQLite).
	ReadConns int
	Logger    *slog.Logger
	// Postgres, when set, opens that PostgreSQL database instead of
	// <dataDir>/opentalon.db (state.driver: postgres); the data directory
	// still holds the media files.
	Postgres *Postgres
	// Holder names this claimer of the queue in the leases it takes (one
	// per replica; default: a random id).
	Holder string
	// LeaseTTL is how long a claim holds a queue item unless renewed
	// (queue.lease_ttl); 0 = until the claimer finishes it, for a sole
	// claimer that never loses its leases to a crash (tests).
	LeaseTTL time.Duration
	// SoleClaimer says no other process claims from this database while
	// this handle is open (SQLite under the data directory's lock): every
	// lease this handle does not hold then belongs to a process that
	// died, and its first claim takes them all back at once.
	SoleClaimer bool
	// Local, on a database replicas share, names a channel whose
	// conversations belong to one process (the console: a terminal) and
	// this process's own conversation of it: claims leave every other
	// conversation of that channel to its own replica, which alone can
	// answer it. Unset: every conversation is claimed alike (SQLite has
	// one process).
	Local LocalConversation
	// Channels, on a database replicas share, names the channels this
	// replica runs (nil: every channel, as on SQLite, where one process
	// runs them all). Claims leave the items of any other channel to a
	// replica that runs it — replicas whose configs differ, as during a
	// rolling deploy that adds or drops one —, until they have waited
	// ChannelWait since they were accepted: then no replica ran their
	// channel meanwhile, and any claims them (to fail them, naming the
	// channel to enable).
	Channels []string
	// ChannelWait is how long an item of a channel this replica does not
	// run is left to the replicas that run it (queue.max_wait; default 10
	// minutes).
	ChannelWait time.Duration
	// SealKey is the AES-256 key (SealKeySize bytes) the short-lived
	// platform credentials are sealed under (KeepSealed); without it they
	// cannot be kept.
	SealKey []byte
	// MediaDir is where the media files are kept (default
	// <dataDir>/media); on PostgreSQL it is this replica's cache.
	MediaDir string
	// scriptsOnly creates a new SQLite database with SQL, not from the
	// schema's image (the tests of both ways).
	scriptsOnly bool
	// lockWait is how long a PostgreSQL migration waits for a table's
	// lock before it lets go and tries again (migrationLockWait when 0).
	lockWait time.Duration
	// syncDir syncs a directory (syncDir when nil); tests replace it.
	syncDir func(dir string) error
}

// Postgres names a PostgreSQL database (state.postgres).
type Postgres struct {
	// DSN is state.postgres.dsn (a secret: never printed).
	DSN string
	// PoolSize bounds the connections (default 10).
	PoolSize int
	// StatementTimeout cancels a statement running longer (0 = none).
	StatementTimeout time.Duration
	// ConnectWait is how long Open retries a server that is not up yet
	// (see transientConnect) before it gives up; 0 = it does not retry.
	ConnectWait time.Duration
	// Writable refuses a server that takes no writes (a standby in
	// recovery, sessions read-only by default), or waits ConnectWait for
	// it to be promoted: the gateway writes every message. Commands that
	// only read leave it off.
	Writable bool
}

// LocalConversation is a channel whose conversations only their own
// process answers (the console: a terminal), this process's conversation
// of it (its thread names the process), and whether this process also
// takes the channel's conversations without a thread, which its
// processes share (what is not typed at a terminal: a schedule's
// firings, a conversation from before the replicas). "" and false: this
// process has no such channel and claims none of its conversations.
type LocalConversation struct {
	Channel      string
	Conversation string
	Shared       bool
}

// args are notOthersLocal's arguments.
func (l LocalConversation) args() []any {
	prefix := l.Channel + ":"
	return []any{prefix, l.Conversation, l.Shared, len(prefix) + 1}
}

// DB is the open database. On SQLite: one writer connection with
// immediate transactions and a read pool; on PostgreSQL one pool for
// both. Safe for concurrent use.
type DB struct {
	w *pool
	r *pool
	// hot serves the reads of a message's path (its session, its
	// history, the queue's heads). On SQLite it is the writer's
	// connection: a commit drops the page cache of every other
	// connection (in WAL mode a read that finds the log changed starts
	// from an empty cache), so a reader re-read each page with a system
	// call after every write; the writer's own cache survives its
	// commits. A hot read waits while a write holds the connection.
	hot *pool
	d   *dialect
	// name says which database this is, in messages (the SQLite file, or
	// the PostgreSQL database and server without credentials).
	name string
	// path is the SQLite file ("" on PostgreSQL).
	path string
	// dataDir holds the media files.
	dataDir string
	now     func() time.Time
	ttl     time.Duration
	keep    time.Duration
	log     *slog.Logger
	// syncFile flushes a file to the disk (files.sync); tests replace it.
	syncFile func(path string) error
	files    fileSyncer
	// named is the sync of a new database's name in its directory (nil
	// when the database was there, or SQLite made it); undated says its
	// migrations wait for Settle to be dated.
	named   *nameSync
	undated atomic.Bool

	// The queue's leases (queue.go).
	holder   string
	leaseTTL time.Duration
	sole     bool
	local    LocalConversation
	// channels and channelWait are Options.Channels and ChannelWait.
	channels    []string
	channelWait time.Duration
	// tookBack says a sole claimer has taken back the leases of the
	// processes before it.
	tookBack   bool
	tookBackMu sync.Mutex

	// wake is the PostgreSQL notification listener (nil on SQLite).
	wake *listener

	// trips counts the statements and transactions the pools send.
	trips tripCounter
	// group is the enqueue's group commit (flush).
	group groupSync
	// inserts groups concurrent SQLite enqueues into one transaction.
	inserts insertGroup
	// txs groups concurrent SQLite write transactions into one.
	txs txGroup
	// lockWait is Options.lockWait.
	lockWait time.Duration
	// sealKey seals the short-lived credentials (sealed.go).
	sealKey []byte
	// media overrides the media directory (Options.MediaDir).
	media string
	// blobs keeps the media files beyond this machine (UseBlobs).
	blobs atomic.Pointer[blobStore]
}

// Open opens (creating if needed) <dataDir>/opentalon.db, or the
// PostgreSQL database of o.Postgres, and migrates it.
func Open(ctx context.Context, dataDir string, o Options) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s (state.data_dir): %w", dataDir, err)
	}
	if o.Postgres != nil {
		return openPostgres(ctx, dataDir, o)
	}
	return OpenFile(ctx, filepath.Join(dataDir, FileName), o)
}

// defaults fills the options left unset.
func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Holder == "" {
		b := make([]byte, 6)
		rand.Read(b)
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
	}
}

// newDB is the handle both engines share, before its pools.
func newDB(d *dialect, name, dataDir string, o Options) *DB {
	return &DB{d: d, name: name, dataDir: dataDir, now: o.Now, ttl: o.SessionTTL, keep: o.QueueRetention, log: o.Logger,
		holder: o.Holder, leaseTTL: o.LeaseTTL, sole: o.SoleClaimer, local: o.Local,
		channels: slices.Clone(o.Channels), channelWait: cmp.Or(o.ChannelWait, 10*time.Minute),
		sealKey: append([]byte(nil), o.SealKey...), media: o.MediaDir, lockWait: o.lockWait}
}

// OpenFile opens the SQLite database at path and migrates it.
func OpenFile(ctx context.Context, path string, o Options) (*DB, error) {
	o.defaults()
	// A new database is written from the schema's image (schema.go);
	// where that cannot be, SQLite creates it. SQLite would create the
	// file with the umask's mode (often 0644) and give its -wal and -shm
	// files the same; it holds the conversations.
	fromImage := false
	if !o.scriptsOnly {
		var err error
		fromImage, err = writeFreshImage(path)
		if err != nil {
			o.Logger.Debug("the new database is created with SQL", "database", path, "err", err)
		}
	}
	if !fromImage {
		if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create database %s (state.data_dir): %w", path, err)
		}
	}
	pragmas := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		pragmas.Add("_pragma", p)
	}
	base := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas.Encode()
	// The writer leaves the log's checkpoints to the background
	// (checkpoint.go) unless that falls far behind.
	wdb, err := sql.Open("sqlite", base+"&_txlock=immediate"+fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)&_pragma=journal_size_limit(%d)", walBackstopPages, journalSizeLimit))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db := newDB(sqliteDialect, path, filepath.Dir(path), o)
	db.syncFile = db.files.sync
	if fromImage {
		db.named = startNameSync(filepath.Dir(path), o.syncDir, o.Logger)
	}
	w := newPool(wdb, sqliteDialect, &db.trips)
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db.w, db.path = w, path
	if err := db.migrate(ctx); err != nil {
		w.Close()
		db.named.wait()
		return nil, err
	}
	if fromImage {
		// Its migrations are dated by Settle (migrate saw them undated).
		db.log.Info("created the database", "database", db.name)
	}
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(o.ReadConns)
	r.SetMaxIdleConns(o.ReadConns)
	db.r = newPool(r, sqliteDialect, &db.trips)
	db.hot = w
	db.startCheckpoints()
	return db, nil
}

// Path is the SQLite database file ("" on PostgreSQL).
func (db *DB) Path() string { return db.path }

// Name says which database this is, without credentials: the SQLite
// file, or the PostgreSQL database and its server.
func (db *DB) Name() string { return db.name }

// Driver is "sqlite" or "postgres".
func (db *DB) Driver() string { return db.d.name }

// Unreachable says whether err, from a call of db, met a database out of
// reach for now, which comes back by itself: the network refused or
// dropped the connection, or the server is starting, shutting down or
// failing over (PostgreSQL). A SQLite file is never out of reach so.
func (db *DB) Unreachable(err error) bool {
	return err != nil && db.d.concurrent && transientConnect(err)
}

// Ping checks the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error { return db.r.PingContext(ctx) }

// Close closes the pools (and the PostgreSQL listener).
func (db *DB) Close() error {
	var errs []error
	if db.undated.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, db.Settle(ctx))
		cancel()
	}
	db.named.wait()
	db.stopCheckpoints()
	if db.wake != nil {
		db.wake.close()
	}
	if db.r != nil && db.r != db.w {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	db.files.close()
	return errors.Join(errs...)
}

func (db *DB) ms() int64 { return db.now().UnixMilli() }

type migration struct {
	version int
	name    string
	dir     string
}

// script reads the migration's SQL. Only the migrations to apply are
// read: an up-to-date database is opened without copying them all.
func (m migration) script() (string, error) {
	b, err := migrationFS.ReadFile(m.dir + "/" + m.name)
	return string(b), err
}

// loadMigrations lists the migrations of one engine: dir is
// "migrations" (SQLite) or "migrations_pg" (PostgreSQL).
func loadMigrations(dir string) ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, dir)
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
		ms = append(ms, migration{version: v, name: e.Name(), dir: dir})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a number", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// migrationsTable is the table of applied migrations, per engine.
var migrationsTable = map[string]string{
	"sqlite": `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
	"postgres": `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
}

// migrationLock is the PostgreSQL advisory lock held while migrating:
// of several replicas starting at once one migrates, the others wait for
// it and then find nothing left to do.
const migrationLock = 0x6f74_6d69_6772_6174 // "otmigrat"

// migrate applies the embedded migrations not yet recorded, each in its
// own transaction, and refuses a database written by a newer version.
// It runs on one connection; on PostgreSQL that connection holds the
// migration lock throughout.
func (db *DB) migrate(ctx context.Context) error {
	dir := "migrations"
	if db.d == postgresDialect {
		dir = "migrations_pg"
	}
	ms, err := loadMigrations(dir)
	if err != nil {
		return err
	}
	// One-off queries bypass the statement cache (a connection of db.w.DB).
	conn, err := db.w.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open database %s: %w", db.name, err)
	}
	defer conn.Close()
	if db.d.concurrent {
		// state.postgres.statement_timeout is for the gateway's queries:
		// the wait for another replica's migrations and a migration's own
		// statements may take longer. The connection goes back to the pool
		// with the timeout it came with.
		if _, err := conn.ExecContext(ctx, `SET statement_timeout = 0`); err != nil {
			return fmt.Errorf("prepare %s for its migrations: %w", db.name, err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `RESET statement_timeout`)
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("lock %s for its migrations: %w", db.name, err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	}
	// An up-to-date database costs this one query; the table of applied
	// migrations is created only when it is missing.
	applied := map[int]bool{}
	have := 0
	rows, err := conn.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations`)
	if err != nil && db.d == sqliteDialect {
		// A new SQLite database: the whole schema in one transaction.
		created, ferr := db.createFresh(ctx, conn, ms)
		if ferr != nil {
			return fmt.Errorf("open database %s: %w", db.name, ferr)
		}
		if created {
			db.log.Info("created the database", "database", db.name, "schema_version", ms[len(ms)-1].version)
			return nil
		}
	}
	if err != nil {
		if _, cerr := conn.ExecContext(ctx, migrationsTable[db.d.name]); cerr != nil {
			return fmt.Errorf("open database %s: %w", db.name, cerr)
		}
		rows, err = conn.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations`)
	}
	if err != nil {
		return fmt.Errorf("read schema version of %s: %w", db.name, err)
	}
	for rows.Next() {
		var v int
		var at int64
		if err := rows.Scan(&v, &at); err != nil {
			rows.Close()
			return err
		}
		applied[v], have = true, max(have, v)
		if at == 0 {
			// Made from the schema's image by a process that stopped
			// before it dated them (Settle).
			db.undated.Store(true)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	if have > latest {
		// Going back to an older release needs the database as it was
		// before the upgrade.
		fix := "restore a backup taken before the upgrade (opentalon restore FILE), or set state.data_dir to another directory"
		if db.d.concurrent {
			fix = "restore a dump taken before the upgrade (pg_restore), or point state.postgres.dsn at another database"
		}
		// The operator's to fix (core.KindInvalid): restarting this
		// binary cannot get past it.
		return core.Errorf(core.KindInvalid, "database %s has schema version %d but this opentalon knows only up to %d: it was written by a newer release; upgrade opentalon, %s", db.name, have, latest, fix)
	}
	var pending []migration
	for _, m := range ms {
		if !applied[m.version] {
			pending = append(pending, m)
		}
	}
	// A fresh database gets its whole schema in one transaction (one
	// commit instead of one per migration); an existing one each pending
	// migration in its own, so a failure names the one that failed and
	// keeps those before it.
	batches := make([][]migration, 0, len(pending))
	if have == 0 && len(pending) > 0 {
		batches = append(batches, pending)
	} else {
		for _, m := range pending {
			batches = append(batches, []migration{m})
		}
	}
	var names []string
	for _, batch := range batches {
		var failed string
		err := db.retryLocked(ctx, func() error {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if db.d.concurrent {
				// A migration's ALTER waits for every transaction on its
				// table, and every later query on the table waits behind
				// it: the other replicas would stall while a long
				// transaction lasts. It gives up instead, and tries again.
				if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, db.migrationLockWait().Milliseconds())); err != nil {
					return err
				}
			}
			for _, m := range batch {
				failed = m.name
				script, err := m.script()
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, script); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, db.d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`), m.version, m.name, db.ms()); err != nil {
					return err
				}
			}
			return tx.Commit()
		}, func() string { return failed })
		if err != nil {
			return fmt.Errorf("apply migration %s to %s: %w", failed, db.name, err)
		}
		for _, m := range batch {
			db.log.Debug("applied database migration", "migration", m.name)
			names = append(names, m.name)
		}
	}
	switch {
	case len(names) == 0:
	case have == 0:
		db.log.Info("created the database", "database", db.name, "schema_version", latest)
	default:
		db.log.Info("migrated the database", "database", db.name, "from_version", have, "to_version", latest, "migrations", len(names))
	}
	return nil
}

// SchemaVersion is the newest migration applied to the database.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// txTries bounds the runs of a PostgreSQL transaction that keeps losing
// conflicts to other writers.
const txTries = 10

// tx runs fn in a write transaction that reads, then writes what it read
// decides. On SQLite it is an immediate transaction: one writer at a
// time, so nothing changes between the read and the write. On PostgreSQL
// it runs SERIALIZABLE: when another replica's transaction would make the
// outcome differ from some serial order, the server aborts one of them
// and fn runs again, at most txTries times. fn must therefore have no
// effect outside the database and start from scratch each time (reset
// what it collects). Queries fn meets for the first time are prepared for
// the next transactions once it ends.
func (db *DB) tx(ctx context.Context, fn func(*txn) error) error {
	return db.runTx(ctx, sql.LevelSerializable, fn)
}

// txLocking runs fn in a write transaction that orders itself against
// others with explicit locks (the queue: a conversation's advisory lock,
// its head row FOR UPDATE, claims with SKIP LOCKED; an affinity row read
// FOR UPDATE before it is folded): READ COMMITTED on PostgreSQL, re-run
// on a deadlock; as tx on SQLite. Every write in fn must either lock
// what it read or depend on no read (an insert, an increment).
func (db *DB) txLocking(ctx context.Context, fn func(*txn) error) error {
	return db.runTx(ctx, sql.LevelReadCommitted, fn)
}

func (db *DB) runTx(ctx context.Context, level sql.IsolationLevel, fn func(*txn) error) error {
	if !db.d.concurrent {
		return db.groupedTx(ctx, fn) // one writer: nothing to retry
	}
	opts := &sql.TxOptions{Isolation: level}
	return db.retried(ctx, func() error { return db.tx1(ctx, opts, fn) })
}

// retried runs fn, a transaction of its own, again while it loses to a
// concurrent one on PostgreSQL (a serialization failure or a deadlock),
// at most txTries times.
func (db *DB) retried(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		if err == nil || !db.d.concurrent || !retryable(err) || try == txTries || ctx.Err() != nil {
			return err
		}
		// Back off a little, at random, so the conflicting transactions
		// do not meet again at once.
		t := time.NewTimer(time.Duration(mrand.Int64N(int64(min(try*try, 50))*int64(time.Millisecond)) + 1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (db *DB) tx1(ctx context.Context, opts *sql.TxOptions, fn func(*txn) error) error {
	tx, err := db.w.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	finished := false
	defer func() {
		if !finished {
			// fn panicked, or its goroutine exited (runtime.Goexit): the
			// writer's connection is not left in the transaction.
			tx.Rollback()
		}
		if tx.missed {
			db.w.prepareWanted(context.WithoutCancel(ctx))
		}
	}()
	err = fn(tx)
	finished = true
	if err != nil {
		tx.Rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		// Ended before the commit: rolled back, as database/sql does when
		// it watches ctx (on SQLite it does not; see statementCtx).
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
