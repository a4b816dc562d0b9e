package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store/pgtest"
)

// records is a slog handler that sends each record, as text, to a
// channel, and keeps them all.
type records struct {
	mu  sync.Mutex
	all []string
	ch  chan string
}

func newRecords() *records { return &records{ch: make(chan string, 100)} }

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%q", a.Key, a.Value.String())
		return true
	})
	r.mu.Lock()
	r.all = append(r.all, b.String())
	r.mu.Unlock()
	select {
	case r.ch <- b.String():
	default:
	}
	return nil
}

func (r *records) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.all, "\n")
}

// next waits for the next record that contains want.
func (r *records) next(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-r.ch:
			if strings.Contains(s, want) {
				return s
			}
		case <-timeout:
			t.Fatalf("no log record says %q; the records:\n%s", want, r.text())
			return ""
		}
	}
}

// TestPostgresWaitsForTheServer: a gateway started before its database
// retries, through a refused connection and a server still starting,
// and opens once the server is up; each attempt is logged, without the
// password.
func TestPostgresWaitsForTheServer(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	later := pgtest.NotYet(t, dsn)

	recs := newRecords()
	type result struct {
		db  *DB
		err error
	}
	done := make(chan result, 1)
	dir := t.TempDir()
	go func() {
		db, err := Open(context.Background(), dir, Options{Postgres: &Postgres{DSN: later.DSN, ConnectWait: 2 * time.Minute}, Logger: slog.New(recs)})
		done <- result{db, err}
	}()

	first := recs.next(t, "PostgreSQL is not up yet")
	for _, w := range []string{"connection refused", "state.postgres.dsn", `attempt="1"`} {
		if !strings.Contains(first, w) {
			t.Errorf("the first retry's record %q does not say %q", first, w)
		}
	}
	later.Starting()
	recs.next(t, "the database system is starting up")
	later.Up()

	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("Open did not return once the server was up; the records:\n%s", recs.text())
	}
	if r.err != nil {
		t.Fatalf("Open: %v", r.err)
	}
	defer r.db.Close()
	if err := r.db.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs := recs.text()
	if !strings.Contains(logs, "PostgreSQL is up") {
		t.Errorf("no record says the server came up:\n%s", logs)
	}
	if password != "" && strings.Contains(logs, password) {
		t.Errorf("the records show the password:\n%s", logs)
	}
}

// TestPostgresConnectWaitLimits: what waiting does not cover. A failure
// only the operator can fix (a wrong password) is returned at once, a
// server that stays down is given up on after state.postgres.connect_wait
// with the key named, and a stop (the context) ends the wait.
func TestPostgresConnectWaitLimits(t *testing.T) {
	admin := pgtest.AdminDSN(t)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), "not-the-password")
	closed := *u
	closed.Host = "127.0.0.1:1"

	t.Run("wrong password", func(t *testing.T) {
		if p, _ := u.User.Password(); p == "" {
			t.Skip("the server takes any password (trust)")
		}
		recs := newRecords()
		_, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: wrong.String(), ConnectWait: time.Hour}, Logger: slog.New(recs)})
		if core.ErrorKind(err) != core.KindAuth {
			t.Fatalf("Open: %v (kind %v); want the refused login, at once", err, core.ErrorKind(err))
		}
		if logs := recs.text(); strings.Contains(logs, "not up yet") {
			t.Errorf("a refused login was retried:\n%s", logs)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		recs := newRecords()
		_, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: closed.String(), ConnectWait: 700 * time.Millisecond}, Logger: slog.New(recs)})
		for _, w := range []string{"gave up after", "state.postgres.connect_wait 700ms", "connection refused", "state.postgres.dsn"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Open: %v; want it to say %q", err, w)
			}
		}
		if core.ErrorKind(err) != core.KindUnavailable {
			t.Errorf("kind %v; want unavailable", core.ErrorKind(err))
		}
		if n := strings.Count(recs.text(), "not up yet"); n < 2 {
			t.Errorf("%d retries logged in 700ms; want at least 2 (backoff from 250ms)", n)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		recs := newRecords()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		dir := t.TempDir()
		go func() {
			_, err := Open(ctx, dir, Options{Postgres: &Postgres{DSN: closed.String(), ConnectWait: time.Hour}, Logger: slog.New(recs)})
			done <- err
		}()
		recs.next(t, "not up yet")
		cancel()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "stopped while waiting for PostgreSQL") || !errors.Is(err, context.Canceled) {
				t.Errorf("Open: %v; want the stop named, as the context's error", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Open kept waiting after its context ended")
		}
	})
	t.Run("TLS handshake refused", func(t *testing.T) {
		addr := clientCertServer(t)
		dsn := fmt.Sprintf("postgres://bot:pw@%s/db?sslmode=require", addr)
		recs := newRecords()
		_, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: dsn, ConnectWait: 3 * time.Second}, Logger: slog.New(recs)})
		for _, w := range []string{"TLS handshake", "certificate required", "sslcert", "state.postgres.dsn"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Open: %v; want it to say %q, at once", err, w)
			}
		}
		if core.ErrorKind(err) != core.KindInvalid {
			t.Errorf("kind %v; a TLS set-up only the operator can fix is invalid (exit status 78)", core.ErrorKind(err))
		}
		if logs := recs.text(); strings.Contains(logs, "not up yet") {
			t.Errorf("a refused TLS handshake was retried:\n%s", logs)
		}
	})
	t.Run("no wait", func(t *testing.T) {
		recs := newRecords()
		_, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: closed.String()}, Logger: slog.New(recs)})
		if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "connect_wait") {
			t.Errorf("Open: %v; want the refusal alone", err)
		}
		if logs := recs.text(); logs != "" {
			t.Errorf("logged without a wait:\n%s", logs)
		}
	})
}

func TestTransientConnect(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"no such host yet", &net.DNSError{Err: "no such host", Name: "db", IsNotFound: true}, true},
		{"reset mid-startup", io.ErrUnexpectedEOF, true},
		{"attempt ran out", context.DeadlineExceeded, true},
		{"starting up", &pq.Error{Code: "57P03"}, true},
		{"shutting down", &pq.Error{Code: "57P01"}, true},
		{"no connection slot", &pq.Error{Code: "53300"}, true},
		{"wrong password", &pq.Error{Code: "28P01"}, false},
		{"no such database", &pq.Error{Code: "3D000"}, false},
		{"only standbys (target_session_attrs=read-write)", errors.New("server is in hot standby mode"), true},
		{"TLS alert from the server", &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, false},
		{"anything else", errors.New("x509: certificate signed by unknown authority"), false},
	} {
		if got := transientConnect(tc.err); got != tc.want {
			t.Errorf("%s: transient %v; want %v", tc.name, got, tc.want)
		}
	}
}

// clientCertServer is a PostgreSQL server's front door that takes TLS
// (answers S to SSLRequest) and then ends the handshake with an alert
// for want of a client certificate; it returns its address. (A real
// server ends it so for a client certificate its ssl_ca_file did not
// sign, "unknown certificate authority"; for none at all it completes
// TLS and refuses the login, 28000: see TestClientCertificateRefused.)
func clientCertServer(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, ClientAuth: tls.RequireAnyClientCert}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				var req [8]byte
				if _, err := io.ReadFull(c, req[:]); err != nil {
					return
				}
				if _, err := c.Write([]byte{'S'}); err != nil {
					return
				}
				tc := tls.Server(c, conf)
				if tc.Handshake() == nil {
					io.Copy(io.Discard, tc)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPostgresReadOnlyServer: a server that takes no writes (a standby
// not yet promoted; here a role whose sessions are read-only by default)
// is refused by what writes (Writable: run, doctor) with the fix named,
// waited for while ConnectWait lasts — on a new connection each time, so
// the promotion is seen — and opened by what only reads.
func TestPostgresReadOnlyServer(t *testing.T) {
	ro := pgtest.ReadOnlyRole(t, pgtest.DSN(t))
	roDSN := ro.DSN

	_, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: roDSN, Writable: true}})
	for _, w := range []string{"is read-only", "a standby in recovery", "state.postgres.dsn", "target_session_attrs=read-write"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Open of a read-only server: %v; want it to say %q", err, w)
		}
	}
	if core.ErrorKind(err) != core.KindUnavailable {
		t.Errorf("kind %v; a standby may be promoted: unavailable (restarted), not invalid", core.ErrorKind(err))
	}

	recs := newRecords()
	done := make(chan error, 1)
	dir := t.TempDir()
	go func() {
		db, err := Open(context.Background(), dir, Options{Postgres: &Postgres{DSN: roDSN, Writable: true, ConnectWait: 2 * time.Minute}, Logger: slog.New(recs)})
		if err == nil {
			// Written: the schema is this role's, on a server it may write.
			_, err = db.w.ExecContext(context.Background(), `INSERT INTO lua_kv (script, key, value, updated_at) VALUES ('t', 'k', 'v', 0)`)
			db.Close()
		}
		done <- err
	}()
	recs.next(t, "is read-only")
	ro.SetReadOnly(false) // the promotion
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the promotion: %v; the records:\n%s", err, recs.text())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Open still waits after the promotion; the records:\n%s", recs.text())
	}

	// What only reads opens a read-only server (its schema is current).
	ro.SetReadOnly(true)
	db, err := Open(context.Background(), t.TempDir(), Options{Postgres: &Postgres{DSN: roDSN}})
	if err != nil {
		t.Fatalf("a reading command on a read-only server: %v", err)
	}
	defer db.Close()
	if _, err := db.HasMemories(context.Background(), "telegram:1"); err != nil {
		t.Errorf("a read on a read-only server: %v", err)
	}
	// Its writes are refused, and told apart from other failures.
	_, err = db.DeleteMemories(context.Background(), "telegram:1")
	if err == nil || !ReadOnlyRefusal(err) {
		t.Errorf("a write on a read-only server: %v; want a ReadOnlyRefusal", err)
	}
	if ReadOnlyRefusal(errors.New("cannot execute DELETE in a read-only transaction")) {
		t.Error("ReadOnlyRefusal goes by the message, not the SQLSTATE")
	}
}

// TestClientCertificateRefused: the login refused for want of a client
// certificate names sslcert and sslkey, not the password.
func TestClientCertificateRefused(t *testing.T) {
	cfg := pq.Config{Host: "db.example", Port: 5432, User: "bot"}
	err := connectError(cfg, &pq.Error{Code: "28000", Message: "connection requires a valid client certificate"})
	for _, w := range []string{"requires a client certificate", "sslcert and sslkey", "state.postgres.dsn", "db.example:5432"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v; want it to say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "password") {
		t.Errorf("%v: blames the password", err)
	}
	// Any other 28000 (no pg_hba.conf entry) is the login refused.
	err = connectError(cfg, &pq.Error{Code: "28000", Message: `no pg_hba.conf entry for host "10.0.0.1"`})
	if !strings.Contains(err.Error(), "refused the login") || core.ErrorKind(err) != core.KindAuth {
		t.Errorf("no pg_hba.conf entry: %v", err)
	}
}
