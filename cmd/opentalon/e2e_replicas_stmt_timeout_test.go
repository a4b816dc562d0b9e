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

// TestE2EStatementTimeoutOnALock: another connection holds a lock the
// gateway needs (a long transaction, an operator's manual UPDATE or a
// migration's LOCK TABLE) for longer than state.postgres.statement_timeout,
// while a message comes in and is handled. Once the lock goes, the message
// is answered exactly once, and the conversation is not wedged: the next
// message is answered too.
func TestE2EStatementTimeoutOnALock(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("holds a lock against a running process")
	}
	for _, tc := range []struct{ name, lock string }{
		{"the session's row", `SELECT id FROM sessions FOR UPDATE`},
		{"the queue against writes", `LOCK TABLE queue IN EXCLUSIVE MODE`},
		{"the replies against writes", `LOCK TABLE replies IN EXCLUSIVE MODE`},
		{"the messages against writes", `LOCK TABLE messages IN EXCLUSIVE MODE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			statementTimeoutOnALock(t, tc.lock)
		})
	}
}

func statementTimeoutOnALock(t *testing.T, lock string) {
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
	if _, err := tx.ExecContext(ctx, lock); err != nil {
		t.Fatalf("%s: %v", lock, err)
	}
	bot.AddUpdate(bot.Private(alice, "while locked"))
	waitLog(t, p, "statement timeout")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	answered := func(what, text string) {
		t.Helper()
		bot.WaitFor(t, what, 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
			for _, s := range sent {
				if strings.Contains(s.Text, text) {
					return true
				}
			}
			return false
		})
	}
	answered("the message sent while locked answered", "while locked")
	bot.AddUpdate(bot.Private(alice, "afterwards"))
	answered("the next message answered", "afterwards")
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
