package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDSNIsAFreshDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	for i, dsn := range []string{a, b} {
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// The same table in each: they do not see each other's.
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (x INT)`); err != nil {
			t.Fatalf("database %d: %v", i, err)
		}
		var sync string
		if err := db.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&sync); err != nil || sync != "off" {
			t.Fatalf("synchronous_commit = %q, %v; a test database does not wait for the disk", sync, err)
		}
	}
	db, err := sql.Open("postgres", DurableDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a fresh database has %d tables (%v)", n, err)
	}
	var sync, fsync string
	if err := db.QueryRowContext(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync')`).Scan(&sync, &fsync); err != nil {
		t.Fatal(err)
	}
	if sync != "on" || fsync != "on" {
		t.Fatalf("durable database: synchronous_commit %s, fsync %s; want both on", sync, fsync)
	}
}

func TestWithoutBinaries(t *testing.T) {
	empty := t.TempDir()
	_, err := binDir(empty, empty)
	if err == nil {
		t.Fatal("found binaries in an empty directory")
	}
	skip, msg := verdict(err, true, "")
	if !skip || !strings.Contains(msg, "apt-get install postgresql") || strings.Contains(msg, "\n") {
		t.Errorf("outside CI: skip %v, %q; want one line naming apt-get install postgresql", skip, msg)
	}
	if skip, msg := verdict(err, true, "true"); skip || !strings.Contains(msg, "CI=true") {
		t.Errorf("under CI=true: skip %v, %q; want a failure", skip, msg)
	}
	if skip, _ := verdict(errors.New("initdb: disk full"), false, ""); skip {
		t.Error("a server that fails to start is skipped; want a failure")
	}
	// Debian's layout: the newest version under the root.
	for _, v := range []string{"13", "15"} {
		dir := filepath.Join(empty, "pg", v, "bin")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "pg_ctl"), []byte("#!/bin/sh\n"), 0o755)
	}
	if got, err := binDir("", filepath.Join(empty, "pg")); err != nil || !strings.HasSuffix(got, "/15/bin") {
		t.Errorf("binDir = %q, %v; want the newest version's", got, err)
	}
}
