package main

// Replicas of one bot on one PostgreSQL (issue 23, part B): what one
// replica received, another can finish.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// replicaConfig is telegramConfig on the PostgreSQL at dsn, in the
// replica's own data directory.
func replicaConfig(dataDir, llmURL, botURL, dsn string) string {
	y := visionCatalog(telegramConfig(dataDir, llmURL, botURL))
	y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
	return insertUnder(y, "queue", "  lease_ttl: 2s\n")
}

// TestE2EReplicaRetryReadsThePhotoWithoutDownloading: a photo answered by
// replica A; A stops (a rolling deploy); /retry is served by replica B,
// whose data directory never held the photo: B shows the model the same
// bytes, read from the database, and the photo is not downloaded again.
func TestE2EReplicaRetryReadsThePhotoWithoutDownloading(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	alice := telegramtest.User(51, "alice")
	jpg := photo(t)
	id := bot.AddFile(jpg)

	dirA, dirB := t.TempDir(), t.TempDir()
	a := startApp(t, loadConfigFile(t, writeConfig(t, replicaConfig(dirA, llm.BaseURL(), bot.URL, dsn))))
	bot.AddUpdate(bot.Photo(alice, id, len(jpg), "what is in this picture?"))
	bot.WaitSent(t, 1, 20*time.Second)
	if u := lastUser(t, llm); len(u.Attachments) != 1 || !bytes.Equal(u.Attachments[0].Data, jpg) {
		t.Fatalf("replica A showed the LLM %d images; want the photo", len(u.Attachments))
	}
	a.shutdown()

	retryOnReplica(t, replicaConfig(dirB, llm.BaseURL(), bot.URL, dsn), bot, llm, alice, jpg, 2, 1)
	// B's media directory now caches it.
	entries, _ := os.ReadDir(filepath.Join(dirB, "media"))
	cached := false
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Size() == int64(len(jpg)) {
			cached = true
		}
	}
	if !cached {
		t.Error("replica B did not keep the photo in its media cache")
	}
}

// TestE2EReplicaWaitsForPostgres: a replica started before its database
// (compose, a pod) retries through a refused connection and a server
// still starting, logging each attempt, and answers once the server is
// up; doctor on the same config says at once that the server is down.
func TestE2EReplicaWaitsForPostgres(t *testing.T) {
	t.Parallel()
	later := pgtest.NotYet(t, pgtest.DSN(t))
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	y := replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, later.DSN)
	// Without connect_wait, run fails at once (issue 22: an unreachable
	// server is a start-up error naming the key and the fix).
	res := runMain(t, nil, "", "--config", writeConfig(t, y), "run")
	if res.code == 0 || !strings.Contains(res.stderr, "state.postgres.dsn") {
		t.Fatalf("run with the server down and no connect_wait: exit %d; want a start-up error naming state.postgres.dsn\n%s", res.code, res.stderr)
	}
	cfg := writeConfig(t, strings.Replace(y, "  postgres: { dsn: ", "  postgres: { connect_wait: 1m, dsn: ", 1))

	res = runMain(t, nil, "", "--config", cfg, "doctor", "--offline")
	if res.code == 0 || !strings.Contains(res.stdout, "cannot reach the PostgreSQL server") || strings.Contains(res.stdout+res.stderr, "not up yet") {
		t.Fatalf("doctor with the server down: exit %d; want it to fail at once, naming the server\n%s%s", res.code, res.stdout, res.stderr)
	}

	// A replica stopped while it waits exits at once, and with status 0:
	// a deploy that gives up on it is not a crash.
	stopped := startBinary(t, nil, "--config", cfg, "run")
	waitLog(t, stopped, "PostgreSQL is not up yet")
	if err := stopped.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := stopped.exitCode(10 * time.Second); code != 0 {
		t.Fatalf("exit status %d after SIGTERM while waiting for PostgreSQL; want 0\n%s", code, stopped.stderr.String())
	}
	if !strings.Contains(stopped.stderr.String(), "stopped during start-up") {
		t.Errorf("the stop is not logged:\n%s", stopped.stderr.String())
	}

	p := startBinary(t, nil, "--config", cfg, "run")
	waitLog := func(want string) { t.Helper(); waitLog(t, p, want) }
	waitLog("PostgreSQL is not up yet")
	later.Starting()
	waitLog("the database system is starting up")
	later.Up()
	waitLog("PostgreSQL is up")

	alice := telegramtest.User(61, "alice")
	bot.AddUpdate(bot.Private(alice, "are you there?"))
	bot.WaitSent(t, 1, 30*time.Second)
	if got := bot.Sent()[0].Text; !strings.Contains(got, "are you there?") {
		t.Errorf("answered %q; want the fake LLM's echo", got)
	}
	if strings.Contains(p.stderr.String(), "connect_wait") {
		t.Errorf("the gateway gave up:\n%s", p.stderr.String())
	}
}

// waitLog waits up to 30 s for p's log to say want.
func waitLog(t *testing.T, p *binProc, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's log never says %q:\n%s", want, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EReplicaConsolesAnswerTheirOwnTerminal (issue 23: the console
// stays a single-process channel): two replicas with a console each and a
// third without one, on one PostgreSQL. Lines typed at each terminal in a
// burst (so most wait in the queue, where any replica's claim could take
// them) are answered on that terminal, in order, and never on the other;
// the replica without a console fails none of them.
func TestE2EReplicaConsolesAnswerTheirOwnTerminal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	r1, r2 := startConsoleReplica(t, dsn, llm.BaseURL(), "r1"), startConsoleReplica(t, dsn, llm.BaseURL(), "r2")
	r3 := startBinary(t, nil, "--config", writeConfig(t, replicaConfig(t.TempDir(), llm.BaseURL(), bot.URL, dsn)), "run")
	waitLog(t, r3, "opentalon running")

	const lines = 6
	for i := range lines {
		r1.send(fmt.Sprintf("from r1 %d", i))
		r2.send(fmt.Sprintf("from r2 %d", i))
	}
	for i := range lines {
		r1.waitLine(fmt.Sprintf("echo: from r1 %d", i))
		r2.waitLine(fmt.Sprintf("echo: from r2 %d", i))
	}
	if out := r1.output(); strings.Contains(out, "from r2") {
		t.Errorf("r1's terminal shows r2's conversation:\n%s", out)
	}
	if out := r2.output(); strings.Contains(out, "from r1") {
		t.Errorf("r2's terminal shows r1's conversation:\n%s", out)
	}
	if log := r3.stderr.String(); strings.Contains(log, `channel "console"`) {
		t.Errorf("the replica without a console touched a console conversation:\n%s", log)
	}
}

// TestE2EReplicaConsolesOnOneHostWarn: two replicas with a console on one
// host and no cluster.replica_id share a console conversation (named
// after the host); the second says so at start, naming the key to set.
func TestE2EReplicaConsolesOnOneHostWarn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	first := startConsoleReplica(t, dsn, llm.BaseURL(), "")
	second := startConsoleReplica(t, dsn, llm.BaseURL(), "")
	waitLog(t, second, "another replica runs on this host")
	if log := second.stderr.String(); !strings.Contains(log, "cluster.replica_id") {
		t.Errorf("the warning does not name the key to set:\n%s", log)
	}
	if strings.Contains(first.stderr.String(), "another replica runs on this host") {
		t.Errorf("the first replica, alone when it started, warned:\n%s", first.stderr.String())
	}
}

// startConsoleReplica starts a replica on the PostgreSQL database of dsn
// with the console as its channel (cluster.replica_id id, unless ""),
// and waits until it runs.
func startConsoleReplica(t *testing.T, dsn, llmURL, id string) *binProc {
	t.Helper()
	extra := ""
	if id != "" {
		extra = "cluster:\n  replica_id: " + id + "\n"
	}
	y := insertUnder(testConfig(t.TempDir(), llmURL, extra), "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
	p := startBinary(t, nil, "--config", writeConfig(t, y), "run")
	waitLog(t, p, "opentalon running")
	return p
}

// TestE2EReplicaIDInUseIsRefused: the leases are held by the replica's
// name, so a second process started under the cluster.replica_id of a
// running replica would hold the scheduler and every other singleton
// lease beside it. It is refused (exit 78, naming the key) while the
// first runs; the same name restarted after a kill -9 of its process
// starts, once the dead record's heartbeat has not moved.
func TestE2EReplicaIDInUseIsRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	config := func() string {
		// A heartbeat long enough that a loaded machine (the -race
		// suite) still beats within two of them: at 200 ms the second
		// process once took the first for a killed predecessor.
		extra := "cluster:\n  replica_id: alpha\n  heartbeat: 1s\n"
		return writeConfig(t, insertUnder(testConfig(t.TempDir(), llm.BaseURL(), extra), "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn)))
	}
	first := startBinary(t, nil, "--config", config(), "run")
	waitLog(t, first, "lease taken")
	second := startBinary(t, nil, "--config", config(), "run")
	if code := second.exitCode(30 * time.Second); code != exitConfig {
		t.Fatalf("a second replica named alpha: exit %d; want %d\n%s", code, exitConfig, second.stderr.String())
	}
	for _, want := range []string{`cluster.replica_id "alpha" is in use by a running replica`, "give each replica its own cluster.replica_id"} {
		if !strings.Contains(second.stderr.String(), want) {
			t.Errorf("the second replica's refusal lacks %q:\n%s", want, second.stderr.String())
		}
	}
	if strings.Contains(second.stderr.String(), "lease taken") {
		t.Errorf("the refused replica took a lease:\n%s", second.stderr.String())
	}
	first.kill()
	restarted := startBinary(t, nil, "--config", config(), "run")
	waitLog(t, restarted, "opentalon running")
	restarted.send("hello again")
	restarted.waitLine("echo: hello again")
}

// retryOnReplica starts a replica with the config yaml, whose data
// directory never held alice's photo jpg, and has it re-answer her with
// /retry: the LLM must see the photo's bytes, read from the database, and
// the bot have sent sent messages with getFile called files times in all
// (no download again).
func retryOnReplica(t *testing.T, yaml string, bot *telegramtest.Server, llm *providertest.Server, alice *models.User, jpg []byte, sent, files int) {
	t.Helper()
	r := startApp(t, loadConfigFile(t, writeConfig(t, yaml)))
	defer r.shutdown()
	bot.AddUpdate(bot.Private(alice, "/retry"))
	bot.WaitSent(t, sent, 20*time.Second)
	if u := lastUser(t, llm); len(u.Attachments) != 1 || !bytes.Equal(u.Attachments[0].Data, jpg) {
		t.Fatalf("the replica's re-answer showed the LLM %d images; want alice's photo, read from the database", len(u.Attachments))
	}
	if n := len(bot.Calls("getFile")); n != files {
		t.Fatalf("getFile called %d times; want %d: the replica reads the photo from the database, it does not download it again", n, files)
	}
}
