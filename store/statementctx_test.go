package store

import (
	"context"
	"errors"
	"runtime/metrics"
	"testing"
)

// goroutinesCreated is the process's count of goroutines started so far.
func goroutinesCreated(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime/metrics has no %s", s[0].Name)
	}
	return s[0].Value.Uint64()
}

// TestSQLiteStatementsStartNoGoroutines: with a context that can be
// cancelled (every request's is), a statement used to start two
// goroutines, the driver's and database/sql's, to watch it; on SQLite a
// started statement runs to its end instead (statementCtx), so a run of
// statements starts (almost) none.
func TestSQLiteStatementsStartNoGoroutines(t *testing.T) {
	db := openTest(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 50
	run := func() {
		for i := range n {
			if _, err := db.w.ExecContext(ctx, `INSERT INTO kv_probe (k) VALUES (?)`, i); err != nil {
				t.Fatal(err)
			}
			var got int
			if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM kv_probe WHERE k = ?`, i).Scan(&got); err != nil {
				t.Fatal(err)
			}
			rows, err := db.r.QueryContext(ctx, `SELECT k FROM kv_probe WHERE k = ?`, i)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE kv_probe (k INTEGER)`); err != nil {
		t.Fatal(err)
	}
	run() // prepares the statements
	before := goroutinesCreated(t)
	run()
	// 3n statements; each started two goroutines before. A few may come
	// from elsewhere in the process (the pool's own housekeeping).
	if started := goroutinesCreated(t) - before; started > n/5 {
		t.Errorf("%d statements started %d goroutines; want almost none (statementCtx on SQLite)", 3*n, started)
	}
}

// TestSQLiteStatementAfterCancelFails: a context already ended still
// fails the statement, outside and inside a transaction.
func TestSQLiteStatementAfterCancelFails(t *testing.T) {
	db := openTest(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE never (k INTEGER)`); !errors.Is(err, context.Canceled) {
		t.Errorf("exec with an ended context: %v, want context.Canceled", err)
	}
	var one int
	if err := db.r.QueryRowContext(ctx, `SELECT 1`).Scan(&one); !errors.Is(err, context.Canceled) {
		t.Errorf("query with an ended context: %v, want context.Canceled", err)
	}
	if _, err := db.w.BeginTx(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("begin with an ended context: %v, want context.Canceled", err)
	}

	// A transaction whose context ends part way through is rolled back:
	// its next statement fails.
	if _, err := db.w.ExecContext(context.Background(), `CREATE TABLE kept (k INTEGER)`); err != nil {
		t.Fatal(err)
	}
	live, stop := context.WithCancel(context.Background())
	err := db.runTx(live, 0, func(tx *txn) error {
		if _, err := tx.ExecContext(live, `INSERT INTO kept (k) VALUES (1)`); err != nil {
			return err
		}
		stop()
		_, err := tx.ExecContext(live, `INSERT INTO kept (k) VALUES (2)`)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction whose context ended part way: %v, want context.Canceled", err)
	}
	if err := db.r.QueryRowContext(context.Background(), `SELECT count(*) FROM kept`).Scan(&one); err != nil || one != 0 {
		t.Errorf("kept holds %d rows (%v), want 0 (rolled back)", one, err)
	}

	// Ended after its last statement, before its commit: rolled back too.
	live, stop = context.WithCancel(context.Background())
	err = db.runTx(live, 0, func(tx *txn) error {
		_, err := tx.ExecContext(live, `INSERT INTO kept (k) VALUES (3)`)
		stop()
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction whose context ended before its commit: %v, want context.Canceled", err)
	}
	if err := db.r.QueryRowContext(context.Background(), `SELECT count(*) FROM kept`).Scan(&one); err != nil || one != 0 {
		t.Errorf("kept holds %d rows (%v), want 0 (rolled back)", one, err)
	}
}
