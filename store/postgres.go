package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"

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
	// The listener's connection gets the same defaults (it takes a
	// connection string, not a Config).
	listenDSN := withDefaults(pg.DSN, cfg)
	applyDefaults(&cfg)
	// A statement outside a transaction (the enqueue's function call
	// among them) relies on reading what others committed before each
	// of its statements: READ COMMITTED, whatever the server's default.
	cfg.Runtime["default_transaction_isolation"] = "read committed"
	if pg.StatementTimeout > 0 {
		cfg.Runtime["statement_timeout"] = strconv.FormatInt(pg.StatementTimeout.Milliseconds(), 10)
	}
	name := describe(cfg)
	connector, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, err
	}
	sdb := sql.OpenDB(connector)
	// The gateway's listener for new work (QueueWake) takes one of the
	// pool_size connections; the queries the rest (one at least).
	queries := max(pg.PoolSize-1, 1)
	sdb.SetMaxOpenConns(queries)
	sdb.SetMaxIdleConns(queries)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	version, err := waitForServer(ctx, sdb, cfg, pg, o.Logger)
	if err != nil {
		sdb.Close()
		return nil, err
	}
	if err := checkVersion(version); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	db := newDB(postgresDialect, name, dataDir, o)
	p := newPool(sdb, postgresDialect, &db.trips)
	db.w, db.r, db.hot = p, p, p
	if err := db.migrate(ctx); err != nil {
		p.Close()
		return nil, err
	}
	db.wake = &listener{dsn: listenDSN, log: db.log, self: db.holder}
	return db, nil
}

// The defaults of a connection where the DSN (or the PG* environment)
// names none: pgx's sslmode (prefer: TLS when the server offers it; pq
// alone would require it), a 15 s connect timeout, and the application
// name shown in pg_stat_activity.
const (
	defaultSSLMode        = pq.SSLModePrefer
	defaultConnectTimeout = 15 * time.Second
	defaultAppName        = "opentalon"
)

func applyDefaults(cfg *pq.Config) {
	if cfg.SSLMode == "" {
		cfg.SSLMode = defaultSSLMode
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.ApplicationName == "" {
		cfg.ApplicationName = defaultAppName
	}
	if cfg.Runtime == nil {
		cfg.Runtime = map[string]string{}
	}
}

// withDefaults returns dsn with the defaults of applyDefaults added as
// parameters where cfg (parsed from dsn) has none.
func withDefaults(dsn string, cfg pq.Config) string {
	var add [][2]string
	if cfg.SSLMode == "" {
		add = append(add, [2]string{"sslmode", string(defaultSSLMode)})
	}
	if cfg.ConnectTimeout == 0 {
		add = append(add, [2]string{"connect_timeout", strconv.Itoa(int(defaultConnectTimeout / time.Second))})
	}
	if cfg.ApplicationName == "" {
		add = append(add, [2]string{"application_name", defaultAppName})
	}
	url := strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
	for _, kv := range add {
		switch {
		case !url:
			dsn += " " + kv[0] + "=" + kv[1]
		case strings.Contains(dsn, "?"):
			dsn += "&" + kv[0] + "=" + kv[1]
		default:
			dsn += "?" + kv[0] + "=" + kv[1]
		}
	}
	return dsn
}

// parseDSN parses state.postgres.dsn (and the PG* environment, as
// libpq does). The driver's own error may quote the DSN, so it is not
// passed on.
func parseDSN(dsn string) (pq.Config, error) {
	if dsn == "" {
		return pq.Config{}, core.Errorf(core.KindInvalid, "state.postgres.dsn is empty; set it to the database's DSN, e.g. postgres://USER:PASSWORD@HOST:5432/DATABASE")
	}
	// A URL of another scheme (mysql://, a typo) would be read as
	// key=value pairs and refused for their quoting: name the scheme
	// (never a secret) instead.
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && urlScheme().MatchString(scheme) && scheme != "postgres" && scheme != "postgresql" {
		return pq.Config{}, core.Errorf(core.KindInvalid, "state.postgres.dsn is a %s:// URL, not a PostgreSQL one; write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=require (or postgresql://…), or as key=value pairs (host=… port=5432 user=… password=… dbname=…)", scheme)
	}
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return pq.Config{}, core.Errorf(core.KindInvalid, "state.postgres.dsn is not a PostgreSQL DSN%s (its text is not shown: it holds the password); write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=require, or as key=value pairs (host=… port=5432 user=… password=… dbname=…)", dsnProblem(err))
	}
	// Connection parameters pq does not know would reach the server as
	// run-time parameters it does not know either: name them here.
	for name := range cfg.Runtime {
		if clientParam(name) {
			return pq.Config{}, core.Errorf(core.KindInvalid, "state.postgres.dsn sets %s, a connection parameter the PostgreSQL driver (github.com/lib/pq) does not support; remove it from the DSN", name)
		}
	}
	return cfg, nil
}

// urlScheme matches a URL's scheme (RFC 3986).
var urlScheme = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`) })

// dsnProblem says what part of a DSN the driver refused, without its
// text: a parameter's bad value (never the password's: the driver does
// not check that one), or a URL's bad escape or port.
func dsnProblem(err error) string {
	var ue *url.Error
	switch msg := err.Error(); {
	case errors.As(err, &ue):
		var esc url.EscapeError
		if errors.As(ue.Err, &esc) {
			return ": a % in it does not start an escape (write % in the password as %25, and @ : / ? # as %40 %3A %2F %3F %23)"
		}
		if strings.Contains(ue.Err.Error(), "invalid port") {
			return ": its port is not a number, or the password holds an @ : / ? or # not written as %40 %3A %2F %3F %23"
		}
	case strings.HasPrefix(msg, "missing \"=\" after"), strings.HasPrefix(msg, "unterminated quoted string"):
		return ": in key=value form a value with spaces or quotes must be quoted, as password='my secret' (\\' for a quote in it)"
	case strings.HasPrefix(msg, "pq: wrong value for $"):
		v, rest, _ := strings.Cut(strings.TrimPrefix(msg, "pq: wrong value for $"), ":")
		return fmt.Sprintf(": the environment variable $%s, which the driver reads as well, has a wrong value%s; fix or unset it", v, takes(rest))
	case strings.HasPrefix(msg, "pq: wrong value for \""):
		// Only the key and what it takes: the value may be a piece of a
		// password (key=value form, an unquoted password with a space).
		k, rest, _ := strings.Cut(strings.TrimPrefix(msg, "pq: wrong value for \""), "\"")
		return fmt.Sprintf(": the value of %q is wrong%s; in key=value form quote a value with spaces: password='…'", k, takes(rest))
	}
	return ""
}

// takes is " (it takes …)" with the values a driver's refusal lists as
// supported, or "".
func takes(refusal string) string {
	if _, values, ok := strings.Cut(refusal, "supported values are "); ok {
		return " (it takes " + values + ")"
	}
	return ""
}

// clientParam says name is a client-side DSN parameter of libpq or pgx
// (the former driver) rather than a server run-time parameter.
func clientParam(name string) bool {
	switch name {
	case "statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode", "min_read_buffer_size",
		"servicefile", "sslpassword", "sslcertmode", "channel_binding", "require_auth", "gssencmode", "sslcrl", "sslcrldir",
		"requirepeer", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout":
		return true
	}
	return strings.HasPrefix(name, "pool_")
}

// describe names a database without credentials.
func describe(cfg pq.Config) string {
	return fmt.Sprintf("PostgreSQL database %q on %s", cfg.Database, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
}

// connectError turns a failure to connect into a start-up error that
// names state.postgres.dsn and the likely fix.
func connectError(cfg pq.Config, err error) error {
	server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	var pe *pq.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28000":
			if strings.Contains(pe.Message, "certificate") {
				return &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("PostgreSQL at %s requires a client certificate of user %q (state.postgres.dsn): set sslcert and sslkey in the DSN to a certificate the server's ssl_ca_file signed, with the user's name as its common name", server, cfg.User), Err: err}
			}
			fallthrough
		case "28P01":
			return &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("PostgreSQL at %s refused the login of user %q (state.postgres.dsn): check the user and password in the DSN, and that pg_hba.conf lets this host in", server, cfg.User), Err: err}
		case "3D000":
			return &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("the database %q does not exist on the PostgreSQL server at %s (state.postgres.dsn): create it (createdb -O %s %s, or CREATE DATABASE %s OWNER %s) or name another in the DSN", cfg.Database, server, cfg.User, cfg.Database, cfg.Database, cfg.User), Err: err}
		case "53300":
			return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("the PostgreSQL server at %s has no connection slot left (state.postgres.dsn): lower state.postgres.pool_size or raise the server's max_connections", server), Err: err}
		}
		return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("PostgreSQL at %s refused the connection (state.postgres.dsn): %s (SQLSTATE %s)", server, pe.Message, pe.Code), Err: err}
	}
	if errors.Is(err, pq.ErrSSLNotSupported) {
		return &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("the PostgreSQL server at %s does not take TLS, and state.postgres.dsn asks for it (sslmode=%s): turn on ssl in the server's postgresql.conf, or, on a network you trust, set sslmode=disable in the DSN", server, cfg.SSLMode)}
	}
	var ce *tls.CertificateVerificationError
	var he x509.HostnameError
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ce) || errors.As(err, &he) || errors.As(err, &ua) {
		return &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("the PostgreSQL server at %s has a TLS certificate that sslmode=%s does not accept (state.postgres.dsn): name the CA that signed it with sslrootcert=FILE in the DSN, or use sslmode=require to encrypt without checking it", server, cfg.SSLMode), Err: err}
	}
	if tlsAlert(err) {
		return &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("the TLS handshake with the PostgreSQL server at %s failed (state.postgres.dsn): check sslmode, and sslcert and sslkey when the server asks for a client certificate (one signed by its ssl_ca_file)", server), Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("cannot reach the PostgreSQL server at %s (state.postgres.dsn): %v; check that it runs and that host and port in the DSN are right", server, rootCause(err)), Err: err}
	}
	return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("cannot connect to the PostgreSQL server at %s (state.postgres.dsn)", server), Err: err}
}

// waitForServer connects to the server and returns its version
// (server_version_num) once it answers and takes writes. A server that
// is not up yet (transientConnect: a container or a failover still
// starting) or is read-only (a standby not yet promoted) is tried again
// with backoff for up to wait, each attempt logged; any other failure (a
// wrong password, a missing database, TLS) is returned at once, as is
// every failure when wait is 0. A stop (ctx) ends the wait at once:
// waitStopped.
func waitForServer(ctx context.Context, sdb *sql.DB, cfg pq.Config, pg Postgres, log *slog.Logger) (int, error) {
	wait := pg.ConnectWait
	if wait <= 0 {
		version, readOnly, err := probe(ctx, sdb, pg.Writable)
		switch {
		case err != nil:
			return 0, connectError(cfg, err)
		case readOnly:
			return 0, readOnlyError(cfg)
		}
		return version, nil
	}
	start := time.Now()
	deadline := start.Add(wait)
	delay := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		// The last attempt, at the deadline, still gets lastTry.
		version, readOnly, err := probeWithin(ctx, sdb, pg.Writable, later(deadline, time.Now().Add(lastTry)))
		if err == nil && !readOnly {
			if attempt > 1 {
				log.Info("PostgreSQL is up", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return version, nil
		}
		cerr := readOnlyError(cfg)
		if err != nil {
			cerr = connectError(cfg, err)
		}
		if ctx.Err() != nil {
			return 0, waitStopped{ctx: ctx.Err(), last: cerr}
		}
		if err != nil && !transientConnect(err) {
			return 0, cerr
		}
		left := time.Until(deadline)
		if left <= 0 {
			waited := time.Since(start).Round(100 * time.Millisecond)
			if err == nil {
				return 0, fmt.Errorf("gave up after %s (state.postgres.connect_wait %s) waiting for PostgreSQL to take writes: %w", waited, wait, cerr)
			}
			return 0, fmt.Errorf("gave up after %s (state.postgres.connect_wait %s; raise it if the server takes longer to start) waiting for PostgreSQL to come up: %w", waited, wait, cerr)
		}
		d := min(delay, left)
		msg := "PostgreSQL is not up yet; retrying"
		if err == nil {
			msg = "PostgreSQL takes no writes yet (a standby not yet promoted?); retrying"
		}
		log.Warn(msg, "attempt", attempt, "retry_in", d.Round(time.Millisecond).String(), "gives_up_in", left.Round(time.Second).String(), "err", cerr.Error())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, waitStopped{ctx: ctx.Err(), last: cerr}
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// probe connects and reads the server's version and, when writable is
// asked, whether it takes writes: a standby in recovery does not, nor
// does a server or role whose sessions are read-only by default. A
// read-only connection is dropped, not pooled (a standby promoted later
// serves writes on new connections only).
func probe(ctx context.Context, sdb *sql.DB, writable bool) (version int, readOnly bool, err error) {
	conn, err := sdb.Conn(ctx)
	if err != nil {
		return 0, false, err
	}
	defer conn.Close()
	err = conn.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int,
		pg_is_in_recovery() OR current_setting('transaction_read_only')::bool`).Scan(&version, &readOnly)
	if err != nil {
		return 0, false, err
	}
	if !writable {
		return version, false, nil
	}
	if readOnly {
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return version, readOnly, nil
}

// readOnlyError says the server at cfg's address takes no writes.
func readOnlyError(cfg pq.Config) error {
	server := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	return &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("the PostgreSQL server at %s is read-only: a standby in recovery, or default_transaction_read_only is on (state.postgres.dsn): point the DSN at the primary, or name every server with target_session_attrs=read-write (postgres://USER:PASSWORD@db1:5432,db2:5432/DATABASE?target_session_attrs=read-write)", server)}
}

// ReadOnlyRefusal says err is a write PostgreSQL refused because the
// server or the session takes no writes (SQLSTATE 25006: a standby, or
// default_transaction_read_only on). The commands that open the store
// only to read open such a server; this tells their writes apart.
func ReadOnlyRefusal(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "25006"
}

// ReadOnlyFix is what to do about a ReadOnlyRefusal.
const ReadOnlyFix = "the PostgreSQL server takes no writes: a standby in recovery, or default_transaction_read_only is on (state.postgres.dsn): point the DSN at the primary, or name every server with target_session_attrs=read-write"

// lastTry is what an attempt at the end of the wait still gets.
const lastTry = 2 * time.Second

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// probeWithin is probe, given up at deadline or when ctx ends. The
// driver bounds a connection's TLS and start-up exchange by its
// connect_timeout alone, not by the context; such an attempt is left to
// end on its own (the caller closes the pool).
func probeWithin(ctx context.Context, sdb *sql.DB, writable bool, deadline time.Time) (int, bool, error) {
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type result struct {
		version  int
		readOnly bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.version, r.readOnly, r.err = probe(actx, sdb, writable)
		done <- r
	}()
	select {
	case r := <-done:
		return r.version, r.readOnly, r.err
	case <-actx.Done():
		return 0, false, actx.Err()
	}
}

// waitStopped is the wait for the server ended by its context (a
// SIGTERM): it is that context's error, and tells what the last attempt
// met.
type waitStopped struct{ ctx, last error }

func (e waitStopped) Error() string {
	return "stopped while waiting for PostgreSQL to come up: " + e.last.Error()
}

func (e waitStopped) Unwrap() []error { return []error{e.ctx, e.last} }

// transientConnect says whether a failed connection is one a server
// still starting gives: the network refuses or drops it, the host name
// does not resolve yet, or the server answers that it is starting,
// shutting down or out of connection slots.
func transientConnect(err error) bool {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return pe.Code.Class() == "57" || pe.Code == "53300"
	}
	if tlsAlert(err) {
		return false
	}
	// target_session_attrs=read-write found only standbys: a failover
	// not yet over (the driver says so in words only).
	if msg := err.Error(); strings.Contains(msg, "server is in hot standby mode") || strings.Contains(msg, "session is read-only") {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, driver.ErrBadConn)
}

// tlsAlert says whether err is a TLS handshake the server (remote) or
// this side (local) ended with an alert: a server that requires a
// client certificate, or a TLS version the other does not speak.
func tlsAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && (oe.Op == "remote error" || oe.Op == "local error")
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
	// server_version_num is major*10000+minor from version 10 on, and
	// major*10000+minor*100+patch before (90624 is 9.6.24).
	version := fmt.Sprintf("%d.%d", num/10000, num%10000)
	if num < 100000 {
		version = fmt.Sprintf("%d.%d.%d", num/10000, num/100%100, num%100)
	}
	return core.Errorf(core.KindInvalid, "the server runs PostgreSQL %s, older than %d, the oldest opentalon supports (state.postgres.dsn): upgrade the server or name a newer one",
		version, MinPostgres/10000)
}

// notifyChannel is the PostgreSQL notification channel of the queue: an
// enqueue that gives a conversation new work notifies it at commit.
const notifyChannel = "opentalon_queue"

// listener holds a connection of its own that LISTENs on notifyChannel
// and wakes the local dispatcher when another replica enqueues. The
// dispatcher's timer stays the fallback: a lost connection is re-opened
// with backoff, and a notification missed meanwhile waits for the timer.
type listener struct {
	dsn  string
	log  *slog.Logger
	once sync.Once
	ch   chan struct{}
	// stops receives the conversations /stop named (stopChannel) through
	// other gateways; self is this one's holder, whose own stops it has
	// acted on already.
	stops  chan core.ConversationKey
	self   string
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
		l.stops = make(chan core.ConversationKey, 16)
		l.done = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go l.run(ctx)
	})
	return l.ch
}

// listenRetryMax is the longest wait between the listener's tries to
// connect again: no longer than the dispatcher's poll, so that once the
// server is back its notifications — new work of other replicas, and a
// /stop typed on another replica, which reaches the work only this way —
// are heard again within it, however long the outage was (the wait was
// up to 30 s).
const listenRetryMax = 2 * time.Second

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	wait := 100 * time.Millisecond
	var lostAt time.Time // when the connection was lost; zero while connected
	tries := 0
	for ctx.Err() == nil {
		err := l.listen(ctx, func() {
			wait = 100 * time.Millisecond
			if !lostAt.IsZero() {
				l.log.Info("queue notifications: connected again", "lost_for", time.Since(lostAt).Round(time.Millisecond).String(), "tries", tries)
				lostAt, tries = time.Time{}, 0
			}
		})
		if ctx.Err() != nil {
			return
		}
		tries++
		if lostAt.IsZero() {
			lostAt = time.Now()
			l.log.Warn("queue notifications: connection lost; the dispatcher polls until it is back", "err", err, "retry_in", wait)
		} else {
			l.log.Debug("queue notifications: still no connection; trying again", "err", err, "retry_in", wait, "tries", tries)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, listenRetryMax)
	}
}

// listen connects, LISTENs and forwards notifications until the
// connection fails or ctx ends. pq's ListenerConn does not take a
// context: a dial still under way when ctx ends is left to finish (within
// connect_timeout) and closed.
func (l *listener) listen(ctx context.Context, connected func()) error {
	notes := make(chan *pq.Notification, 32)
	type dialed struct {
		conn *pq.ListenerConn
		err  error
	}
	got := make(chan dialed, 1)
	go func() {
		conn, err := pq.NewListenerConn(l.dsn, notes)
		if err != nil {
			got <- dialed{err: err}
			return
		}
		for _, ch := range []string{notifyChannel, stopChannel} {
			if _, err := conn.Listen(ch); err != nil {
				conn.Close()
				got <- dialed{err: err}
				return
			}
		}
		got <- dialed{conn: conn}
	}()
	var conn *pq.ListenerConn
	select {
	case <-ctx.Done():
		go func() {
			if d := <-got; d.conn != nil {
				d.conn.Close()
			}
		}()
		return ctx.Err()
	case d := <-got:
		if d.err != nil {
			return d.err
		}
		conn = d.conn
	}
	defer conn.Close()
	connected()
	// Work may have arrived while there was no connection.
	l.poke()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case n, ok := <-notes:
			if !ok { // the connection is lost
				if err := conn.Err(); err != nil {
					return err
				}
				return errors.New("the notification connection closed")
			}
			if n != nil && n.Channel == stopChannel {
				from, conv, _ := strings.Cut(n.Extra, "\n")
				if from == l.self {
					// Its gateway stopped its own work before it told the
					// others; by now that work may have ended and the next
					// message begun, which this stop is not for.
					continue
				}
				select {
				case l.stops <- core.ParseConversationKey(conv):
				default: // a burst of stops: the ones queued stop the same work
				}
				continue
			}
			l.poke()
		}
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
