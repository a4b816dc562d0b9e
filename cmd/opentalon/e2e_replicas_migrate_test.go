package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicaKeepsWorkingAcrossANewerMigration: a rolling deploy across
// a schema migration. A replica of this release runs while a newer release
// migrates the database under it (simulated here as the newer release's
// additive migration: a column with a default on every table, a new table,
// and its row in schema_migrations). The running replica keeps answering,
// in a chat it already served and in a new one; a replica of this release
// started after the migration refuses to start, naming the newer schema
// and the fix, and touches nothing.
func TestE2EReplicaKeepsWorkingAcrossANewerMigration(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	old := startBinary(t, nil, "--config", writeConfig(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, dsn)), "--log-level", "debug", "run")
	waitLog(t, old, pollerHeld)
	alice, bob := telegramtest.User(81, "alice"), telegramtest.User(82, "bob")
	bot.AddUpdate(bot.Private(alice, "before the migration"))
	bot.WaitSent(t, 1, 30*time.Second)

	ctx := context.Background()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("tables %v: the schema was not found", tables)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %q ADD COLUMN future_note TEXT NOT NULL DEFAULT ''`, tb)); err != nil {
			t.Fatalf("add a column to %s: %v", tb, err)
		}
	}
	for _, q := range []string{
		`CREATE TABLE future_things (id BIGSERIAL PRIMARY KEY, note TEXT NOT NULL)`,
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	bot.AddUpdate(bot.Private(alice, "after the migration"))
	bot.AddUpdate(bot.Private(bob, "a new chat after the migration"))
	bot.WaitFor(t, "both messages after the migration answered", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		n := 0
		for _, s := range sent {
			if strings.Contains(s.Text, "after the migration") {
				n++
			}
		}
		return n == 2
	})

	var before int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	restarted := startBinary(t, nil, "--config", writeConfig(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, dsn)), "run")
	if code := restarted.exitCode(30 * time.Second); code != exitConfig {
		t.Fatalf("a replica of the older release on the newer schema: exit %d; want %d\n%s", code, exitConfig, restarted.stderr.String())
	}
	for _, want := range []string{"schema version 9999", "newer release", "upgrade opentalon", "state.postgres.dsn"} {
		if !strings.Contains(restarted.stderr.String(), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, restarted.stderr.String())
		}
	}
	var after int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&after); err != nil || after != before {
		t.Errorf("schema_migrations after the refusal: %d rows, %d before (%v)", after, before, err)
	}

	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := old.exitCode(60 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM; log:\n%s", code, tail(old.stderr.String(), 40))
	}
	if strings.Contains(old.stderr.String(), "future_note") {
		t.Errorf("the running replica tripped on the newer schema:\n%s", tail(old.stderr.String(), 40))
	}
}
