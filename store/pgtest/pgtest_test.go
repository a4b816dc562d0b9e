package pgtest

import (
	"context"
	"database/sql"
	"testing"
)

func TestDSNIsAFreshDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	for i, dsn := range []string{a, b} {
		db, err := sql.Open("pgx", dsn)
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
	db, err := sql.Open("pgx", DurableDSN(t))
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
