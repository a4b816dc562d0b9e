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

// TestE2EStatementTimeoutOnALockedSession: another connection holds the
// row lock on alice's session (a long transaction, an operator's manual
// UPDATE) for longer than state.postgres.statement_timeout, while her
// message is handled. Once the lock goes, the message is answered exactly
// once, and her conversation is not wedged: the next message is answered
// too.
func TestE2EStatementTimeoutOnALockedSession(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("holds a lock against a running process")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	y := visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))
	y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q, statement_timeout: 1s }\n", dsn))
	y = insertUnder(y, "queue", "  lease_ttl: 2s\n")
	p := startBinary(t, nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
	waitLog(t, p, pollerHeld)
	alice := telegramtest.User(91, "alice")
	bot.AddUpdate(bot.Private(alice, "first"))
	bot.WaitSent(t, 1, 30*time.Second)

	ctx := context.Background()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT id FROM sessions FOR UPDATE) s`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("lock the sessions: %d, %v", n, err)
	}
	bot.AddUpdate(bot.Private(alice, "while locked"))
	waitLog(t, p, "statement timeout")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	bot.WaitFor(t, "the message sent while the session was locked answered", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent {
			if strings.Contains(s.Text, "while locked") {
				return true
			}
		}
		return false
	})
	bot.AddUpdate(bot.Private(alice, "afterwards"))
	bot.WaitFor(t, "the next message answered", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent {
			if strings.Contains(s.Text, "afterwards") {
				return true
			}
		}
		return false
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(60 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM; log:\n%s", code, tail(p.stderr.String(), 40))
	}
	for _, w := range []string{"while locked", "afterwards"} {
		c := 0
		for _, s := range bot.Sent() {
			if strings.Contains(s.Text, w) {
				c++
			}
		}
		if c != 1 {
			t.Errorf("%q answered %d times; log:\n%s", w, c, tail(p.stderr.String(), 60))
		}
	}
}
