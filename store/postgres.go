package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/opentalon/opentalon/core"
)

// MinPostgres is the oldest PostgreSQL server the store runs on
// (server_version_num).
const MinPostgres = 140000

// openPostgres connects to the database of o.Postgres, checks the server,
// and migrates it under the migration lock. Every error names the config
// key and the fix, and never the DSN (it holds the password).
func openPostgres(ctx context.Context, dataDir string, o Options) (*DB, error) {
	o.defaults()
	pg := *o.Postgres
	if pg.PoolSize <= 0 {
		pg.PoolSize = 10
	}
	cfg, err := parseDSN(pg.DSN)
	if err != nil {
		return nil, err
	}
	if pg.StatementTimeout > 0 {
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(pg.StatementTimeout.Milliseconds(), 10)
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "opentalon"
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	name := describe(cfg)
	sdb := stdlib.OpenDB(*cfg)
	sdb.SetMaxOpenConns(pg.PoolSize)
	sdb.SetMaxIdleConns(pg.PoolSize)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, connectError(cfg, err)
	}
	var version int
	if err := sdb.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("read the server version of %s: %w", name, err)
	}
	if err := checkVersion(version); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	db := newDB(postgresDialect, name, dataDir, o)
	p := newPool(sdb, postgresDialect, &db.trips)
	db.w, db.r = p, p
	if err := db.migrate(ctx); err != nil {
		p.Close()
		return nil, err
	}
	db.wake = &listener{cfg: cfg, log: o.Logger}
	return db, nil
}

// parseDSN parses state.postgres.dsn. pgx's own error quotes the DSN
// (best-effort redacted) and may quote it in its cause too, so it is not
// passed on.
func parseDSN(dsn string) (*pgx.ConnConfig, error) {
	if dsn == "" {
		return nil, core.Errorf(core.KindInvalid, "state.postgres.dsn is empty; set it to the database's DSN, e.g. postgres://USER:PASSWORD@HOST:5432/DATABASE")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, core.Errorf(core.KindInvalid, "state.postgres.dsn is not a PostgreSQL DSN (its text is not shown: it holds the password); write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=require, or as key=value pairs (host=… port=5432 user=… password=… dbname=…)")
	}
	return cfg, nil
}

// describe names a database without credentials.
func describe(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("PostgreSQL database %q on %s", cfg.Database, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
}

// connectError turns a failure to connect into a start-up error that
// names state.postgres.dsn and the likely fix.
func connectError(cfg *pgx.ConnConfig, err error) error {
	server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000":
			return &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("PostgreSQL at %s refused the login of user %q (state.postgres.dsn): check the user and password in the DSN, and that pg_hba.conf lets this host in", server, cfg.User), Err: err}
		case "3D000":
			return &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("the database %q does not exist on the PostgreSQL server at %s (state.postgres.dsn): create it (createdb -O %s %s, or CREATE DATABASE %s OWNER %s) or name another in the DSN", cfg.Database, server, cfg.User, cfg.Database, cfg.Database, cfg.User), Err: err}
		case "53300":
			return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("the PostgreSQL server at %s has no connection slot left (state.postgres.dsn): lower state.postgres.pool_size or raise the server's max_connections", server), Err: err}
		}
		return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("PostgreSQL at %s refused the connection (state.postgres.dsn): %s (SQLSTATE %s)", server, pe.Message, pe.Code), Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("cannot reach the PostgreSQL server at %s (state.postgres.dsn): %v; check that it runs and that host and port in the DSN are right", server, rootCause(err)), Err: err}
	}
	return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("cannot connect to the PostgreSQL server at %s (state.postgres.dsn): %v", server, rootCause(err)), Err: err}
}

// rootCause is the innermost error (a dial error's "connection refused").
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// checkVersion refuses a server older than MinPostgres.
func checkVersion(num int) error {
	if num >= MinPostgres {
		return nil
	}
	return core.Errorf(core.KindInvalid, "the server runs PostgreSQL %d.%d, older than %d, the oldest opentalon supports (state.postgres.dsn): upgrade the server or name a newer one",
		num/10000, num%10000, MinPostgres/10000)
}

// notifyChannel is the PostgreSQL notification channel of the queue: an
// enqueue that gives a conversation new work notifies it at commit.
const notifyChannel = "opentalon_queue"

// listener holds a connection of its own that LISTENs on notifyChannel
// and wakes the local dispatcher when another replica enqueues. The
// dispatcher's timer stays the fallback: a lost connection is re-opened
// with backoff, and a notification missed meanwhile waits for the timer.
type listener struct {
	cfg *pgx.ConnConfig
	log interface {
		Warn(string, ...any)
	}
	once   sync.Once
	ch     chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// QueueWake returns a channel that receives when another replica may have
// given a conversation new work (PostgreSQL LISTEN/NOTIFY); nil on
// SQLite, where the one gateway pokes itself.
func (db *DB) QueueWake() <-chan struct{} {
	if db.wake == nil {
		return nil
	}
	return db.wake.start()
}

func (l *listener) start() <-chan struct{} {
	l.once.Do(func() {
		l.ch = make(chan struct{}, 1)
		l.done = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go l.run(ctx)
	})
	return l.ch
}

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx, func() { wait = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("queue notifications: connection lost; the dispatcher polls until it is back", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}

// listen connects, LISTENs and forwards notifications until the
// connection fails or ctx ends.
func (l *listener) listen(ctx context.Context, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	connected()
	// Work may have arrived while there was no connection.
	l.poke()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		l.poke()
	}
}

func (l *listener) poke() {
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

func (l *listener) close() {
	// After this, start starts nothing; and a start that ran is seen.
	l.once.Do(func() {})
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}
