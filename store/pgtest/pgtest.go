package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/lib/pq" // registers the "postgres" driver
)

// EnvServer names an existing server to use instead of starting one: a
// DSN (postgres://user:password@host:port/database) of a role that may
// create databases.
const EnvServer = "OPENTALON_TEST_POSTGRES"

// InstallHint is how to get the binaries the private server needs.
const InstallHint = "apt-get install postgresql"

// server is the one server of this test binary: its admin DSN, or why
// there is none. The state is per process by nature (one server per test
// binary), hence package-level.
var server struct {
	once sync.Once
	dsn  string // admin DSN (database postgres)
	err  error
	// missing says the binaries are not installed (a skip, not a failure,
	// outside CI).
	missing bool
}

// AdminDSN returns the DSN of the server's maintenance database
// (postgres), starting the server first if needed. Tests of connection
// errors derive wrong passwords and missing databases from it.
func AdminDSN(t testing.TB) string {
	t.Helper()
	server.once.Do(func() { server.dsn, server.missing, server.err = start() })
	if server.err != nil {
		if skip, msg := verdict(server.err, server.missing, os.Getenv("CI")); skip {
			t.Skip(msg)
		} else {
			t.Fatal(msg)
		}
	}
	return server.dsn
}

// verdict says whether a test without a server skips (the binaries are
// missing, outside CI) or fails, and with which line.
func verdict(err error, missing bool, ci string) (skip bool, msg string) {
	if missing && ci != "true" {
		return true, fmt.Sprintf("PostgreSQL tests skipped: %v; install it with: %s (or set %s)", err, InstallHint, EnvServer)
	}
	if missing {
		return false, fmt.Sprintf("PostgreSQL for tests: %v; CI=true, so the PostgreSQL tests must run: install it with: %s", err, InstallHint)
	}
	return false, fmt.Sprintf("PostgreSQL for tests: %v", err)
}

// DSN returns the DSN of a fresh, empty database of its own, dropped
// when the test ends. Its commits do not wait for the write-ahead log to
// reach the disk (synchronous_commit off).
//
// The database is a schema of the server's database (search_path in the
// DSN): as isolated as a database for the store, and created in
// milliseconds where CREATE DATABASE takes a second.
func DSN(t testing.TB) string {
	t.Helper()
	return newSchema(t, false)
}

// DurableDSN is DSN with durable commits (synchronous_commit on), for
// benchmarks.
func DurableDSN(t testing.TB) string {
	t.Helper()
	return newSchema(t, true)
}

func newSchema(t testing.TB, durable bool) string {
	t.Helper()
	admin := AdminDSN(t)
	name := "t_" + randomHex(8)
	exec := func(q string) error {
		db, err := sql.Open("postgres", admin)
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err = db.ExecContext(ctx, q)
		return err
	}
	if err := exec(`CREATE SCHEMA ` + name); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(`DROP SCHEMA IF EXISTS ` + name + ` CASCADE`); err != nil {
			t.Logf("drop test schema %s: %v", name, err)
		}
	})
	sync := "off"
	if durable {
		sync = "on"
	}
	return withParams(admin, map[string]string{"search_path": name, "synchronous_commit": sync})
}

// WithDatabase returns dsn naming database instead.
func WithDatabase(dsn, database string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + database
	return u.String()
}

// withParams returns dsn with the run-time parameters set.
func withParams(dsn string, params map[string]string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// start returns the admin DSN of the server of OPENTALON_TEST_POSTGRES or
// of a private server it starts.
func start() (dsn string, missing bool, err error) {
	if dsn := os.Getenv(EnvServer); dsn != "" {
		return dsn, false, ping(dsn)
	}
	bin, err := binDir(os.Getenv("PATH"), "/usr/lib/postgresql")
	if err != nil {
		return "", true, err
	}
	return startPrivate(bin)
}

// binDir finds the directory of initdb and pg_ctl: in path (a PATH),
// else the newest <root>/<version>/bin (Debian keeps them in
// /usr/lib/postgresql).
func binDir(path, root string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "pg_ctl")
		if isExec(p) && isExec(filepath.Join(dir, "initdb")) {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(r), nil
			}
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in %s/*/bin", root)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// startPrivate initializes a cluster in a temporary directory and starts
// it on a free port of 127.0.0.1 with a random password. As root, the
// binaries run as the postgres user (the server refuses to run as root).
func startPrivate(bin string) (string, bool, error) {
	dir, err := os.MkdirTemp("", "opentalon-pg-")
	if err != nil {
		return "", false, err
	}
	fail := func(err error) (string, bool, error) {
		os.RemoveAll(dir)
		return "", false, err
	}
	var owner *user.User
	if os.Geteuid() == 0 {
		if owner, err = user.Lookup("postgres"); err != nil {
			return fail(fmt.Errorf("running as root, the server must run as the postgres user, which does not exist (%s creates it): %w", InstallHint, err))
		}
	}
	password := randomHex(16)
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if owner != nil {
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, uid, gid); err != nil {
				return fail(err)
			}
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) error {
		argv := append([]string{filepath.Join(bin, name)}, args...)
		if owner != nil {
			argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, out)
		}
		return nil
	}
	if err := run("initdb", "-D", data, "-U", "postgres", "--auth=scram-sha-256", "--pwfile="+pwfile,
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return fail(err)
	}
	var port int
	for try := 0; ; try++ {
		port, err = freePort()
		if err != nil {
			return fail(err)
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c synchronous_commit=off -c fsync=on", port, dir)
		err = run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", opts, "start")
		if err == nil {
			break
		}
		if try == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fail(fmt.Errorf("%w\nserver log:\n%s", err, log))
		}
	}
	watch(dir, data, bin, owner != nil)
	dsn := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
	return dsn, false, ping(dsn)
}

// watch starts a process, in a session of its own, that stops the server
// and removes its directory once this test binary has exited.
func watch(dir, data, bin string, asPostgres bool) {
	stop := fmt.Sprintf("%q -D %q stop -m immediate", filepath.Join(bin, "pg_ctl"), data)
	if asPostgres {
		stop = "runuser -u postgres -- " + stop
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s >/dev/null 2>&1; rm -rf %q", os.Getpid(), stop, dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go cmd.Wait()
	}
}

func ping(dsn string) error {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if last = db.PingContext(ctx); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("PostgreSQL for tests does not answer: %w", last)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
