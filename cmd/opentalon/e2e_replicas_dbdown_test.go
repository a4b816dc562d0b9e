package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicaRidesOutAPostgresOutage: a replica answering on
// PostgreSQL loses its server mid-run (every connection cut, the port
// closed), as in a failover of a managed database. The message sent while
// the server is away is answered once it is back, by the same process:
// it takes the poller lease again rather than waiting for a restart.
func TestE2EReplicaRidesOutAPostgresOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("takes a database away from a running process")
	}
	later, bot, p := replicaOnLaterPostgres(t)
	waitLog(t, p, pollerHeld)
	alice := telegramtest.User(71, "alice")
	bot.AddUpdate(bot.Private(alice, "before the outage"))
	bot.WaitSent(t, 1, 30*time.Second)
	// Start-up is over: the schedules are stored and fired here.
	waitLog(t, p, "this replica fires the schedules")

	later.Down()
	bot.AddUpdate(bot.Private(alice, "during the outage"))
	// The outage outlasts the lease: the replica stops its work.
	waitLog(t, p, "lease lost: stopping its work")
	later.Up()
	bot.WaitFor(t, "the message sent during the outage answered", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent {
			if strings.Contains(s.Text, "during the outage") {
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
	// The errors of the outage, logged at debug level, never show the
	// DSN's password.
	u, err := url.Parse(later.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if pw, ok := u.User.Password(); !ok || pw == "" {
		t.Fatalf("the test's DSN has no password: the check below proves nothing")
	} else if strings.Contains(p.stderr.String(), pw) {
		t.Errorf("the log shows the DSN's password")
	}
}

// TestE2EAnswerSentDuringAPostgresOutageIsNotSentAgain: the answer's send
// to Telegram completes while PostgreSQL is away, so its delivery cannot
// be recorded. Once the server is back the answer must not be sent a
// second time: the whole database was away, no other replica could have
// taken the item, and the replica still knows what it sent.
func TestE2EAnswerSentDuringAPostgresOutageIsNotSentAgain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("takes a database away from a running process")
	}
	later, bot, p := replicaOnLaterPostgres(t)
	waitLog(t, p, "this replica fires the schedules")
	alice := telegramtest.User(72, "alice")
	release := bot.Hold("sendMessage")
	bot.AddUpdate(bot.Private(alice, "answered in the outage"))
	bot.WaitFor(t, "the answer's send under way", 30*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "sendMessage" {
				return true
			}
		}
		return false
	})
	later.Down()
	release()
	// The outage lasts past the item's lease (queue.lease_ttl 2s): the
	// replica tried to record the delivery seven times, waiting 0.1, 0.2,
	// 0.4 s and then 0.5 s between tries.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l := p.stderr.String()
		if strings.Count(l, "mark request done; retrying") >= 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica never tried to record the delivery:\n%s", tail(l, 40))
		}
	}
	later.Up()
	bot.AddUpdate(bot.Private(alice, "after the outage"))
	bot.WaitFor(t, "the next message answered", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent {
			if strings.Contains(s.Text, "after the outage") {
				return true
			}
		}
		return false
	})
	n := 0
	for _, s := range bot.Sent() {
		if strings.Contains(s.Text, "answered in the outage") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the answer sent during the outage was sent %d times; want once", n)
	}
	// The store said its failures were the server out of reach, so the
	// replica waited for it rather than giving up after a few tries.
	if l := p.stderr.String(); !strings.Contains(l, "mark request done: the store is out of reach; trying until it answers") {
		t.Errorf("the log does not say the replica waits for the store:\n%s", tail(l, 40))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.exitCode(60 * time.Second)
}

// TestE2EReplicaSurvivesAPostgresBlipAtStart: PostgreSQL goes away in the
// first second after a replica said it runs (a database failover during a
// rolling deploy). The replica must wait for the server as it does for
// every other store call, not exit (it stopped at once, with
// "schedules: load schedules: … connection refused").
func TestE2EReplicaSurvivesAPostgresBlipAtStart(t *testing.T) {
	t.Parallel()
	later := pgtest.NotYet(t, pgtest.DSN(t))
	later.Up()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	p := startBinary(t, nil, "--config", writeConfig(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, later.DSN)), "run")
	waitLog(t, p, "opentalon running")
	later.Down()
	// The scheduler stores the config's schedules a second after start:
	// it meets the outage, and says so.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.stderr.String(), "schedules"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler never met the outage:\n%s", tail(p.stderr.String(), 40))
		}
	}
	select {
	case <-p.done:
		t.Fatalf("the replica exited on a passing outage of PostgreSQL:\n%s", tail(p.stderr.String(), 20))
	default:
	}
	later.Up()
	alice := telegramtest.User(73, "alice")
	bot.AddUpdate(bot.Private(alice, "after the blip"))
	bot.WaitSent(t, 1, 60*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(60 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM:\n%s", code, tail(p.stderr.String(), 40))
	}
}

// replicaOnLaterPostgres runs one replica (debug log, cluster.lease_ttl
// 3s) against a fake Telegram and LLM and a PostgreSQL the test can take
// away (Down) and bring back (Up).
func replicaOnLaterPostgres(t *testing.T) (*pgtest.Later, *telegramtest.Server, *binProc) {
	t.Helper()
	later := pgtest.NotYet(t, pgtest.DSN(t))
	later.Up()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	y := insertUnder(replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, later.DSN), "cluster", "  lease_ttl: 3s\n")
	return later, bot, startBinary(t, nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
}

// TestReadyzNamesTheDatabaseItCannotReach: while PostgreSQL is away or
// still starting, /readyz says which database on which server it cannot
// reach and the key that names it, never the DSN's password: the
// driver's "the database system is starting up" alone names neither.
func TestReadyzNamesTheDatabaseItCannotReach(t *testing.T) {
	t.Parallel()
	later := pgtest.NotYet(t, pgtest.DSN(t))
	later.Up()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, later.DSN))))
	addr := waitAddr(t, h.app)
	// Ready once Telegram answers: a message answered says so.
	bot.AddUpdate(bot.Private(telegramtest.User(74, "alice"), "before the outage"))
	bot.WaitSent(t, 1, 30*time.Second)
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("/readyz with the database up: %d %q", code, body)
	}
	u, err := url.Parse(later.DSN)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if pw == "" {
		t.Fatal("the test's DSN has no password: the check below proves nothing")
	}
	defer later.Up() // the app's shutdown writes
	for _, c := range []struct {
		name string
		away func()
	}{
		{"down", later.Down},
		{"starting", func() { later.Down(); later.Starting() }},
	} {
		c.away()
		code, body := httpGet(t, "http://"+addr+"/readyz")
		if code != 503 {
			t.Errorf("%s: /readyz = %d %q; want 503", c.name, code, body)
		}
		for _, want := range []string{h.app.db.Name(), " on " + u.Host, "state.postgres.dsn"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: /readyz %q does not name %q", c.name, body, want)
			}
		}
		if strings.Contains(body, pw) {
			t.Errorf("%s: /readyz shows the DSN's password: %q", c.name, body)
		}
	}
}

// TestConsoleSaysALineWasNotKeptWhileTheDatabaseIsAway: a console line
// typed while PostgreSQL is out of reach cannot be queued; the console
// says so in words, naming the database and the key, and that the line
// must be sent again (it said only "enqueue: dial tcp …: connection
// refused").
func TestConsoleSaysALineWasNotKeptWhileTheDatabaseIsAway(t *testing.T) {
	t.Parallel()
	later := pgtest.NotYet(t, pgtest.DSN(t))
	later.Up()
	llm := providertest.NewOpenAI(t)
	y := insertUnder(testConfig(t.TempDir(), llm.BaseURL(), ""), "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", later.DSN))
	h := startApp(t, parseConfig(t, y))
	h.send("before the outage")
	h.expect("echo: before the outage")
	defer later.Up() // the app's shutdown writes
	later.Down()
	h.send("during the outage")
	line := h.next()
	for _, want := range []string{"error: message not accepted", h.app.db.Name(), "state.postgres.dsn", "out of reach", "not kept", "send it again"} {
		if !strings.Contains(line, want) {
			t.Errorf("the console's refusal %q lacks %q", line, want)
		}
	}
	// The same error tells a channel that the database will be back
	// (Discord, which cannot have an event sent again, waits for it).
	err := h.app.gateway.Accept(context.Background(), core.Inbound{Conversation: core.ConversationKey{Channel: "console", Chat: "local"}, MessageID: "m-outage", UserID: "u", Text: "x", Private: true})
	if k := core.ErrorKind(err); k != core.KindUnavailable {
		t.Errorf("Accept while the database is away: %v, kind %v; want %v", err, k, core.KindUnavailable)
	}
	u, err := url.Parse(later.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); pw == "" || strings.Contains(line, pw) {
		t.Errorf("the refusal shows the DSN's password (or the DSN has none): %q", line)
	}
}
