package main

// Graceful shutdown and log hygiene of the real process (issue 2): the
// test binary re-executed as opentalon, driven by signals and stdin.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// waitStderr waits until the process's stderr contains s.
func (b *binProc) waitStderr(s string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.stderr.String(), s) {
		if time.Now().After(deadline) {
			b.t.Fatalf("stderr never contained %q:\n%s", s, b.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// queueCounts reads the queue of the database in dir.
func queueCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	db, err := store.Open(context.Background(), dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestE2ESIGTERMFinishesInFlightAndKeepsQueued(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	path := writeConfig(t, testConfig(dir, llm.BaseURL(), "queue: { workers: 1, shutdown_grace: 20s }\n"))
	llm.Hold()
	p := startBinary(t, nil, "--config", path, "run")
	p.send("first question")
	if err := llm.WaitInFlight(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	p.send("second question") // same conversation: queued behind the first
	deadline := time.Now().Add(30 * time.Second)
	for queueCounts(t, dir)[core.StatusQueued] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("second question never queued: %v", queueCounts(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitStderr("shutting down")
	llm.Release() // the held request answers only after the signal
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
	if out := p.output(); out != "echo: first question\n" {
		t.Fatalf("stdout = %q; want the in-flight answer only", out)
	}
	if n := llm.Count(); n != 1 {
		t.Fatalf("LLM calls = %d; want 1 (the second question waits for the next start)", n)
	}
	if c := queueCounts(t, dir); c[core.StatusQueued] != 1 || c[core.StatusRunning] != 0 {
		t.Fatalf("queue after shutdown = %v; want the second question still queued", c)
	}

	// The next start answers what was left, then exits when stdin closes.
	restartAndExpect(t, path, "echo: second question\n")
}

func TestE2EGraceOverLeavesRequestForNextStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	path := writeConfig(t, testConfig(dir, llm.BaseURL(), "queue: { shutdown_grace: 1s }\n"))
	llm.Hold()
	p := startBinary(t, nil, "--config", path, "run")
	p.send("stuck question")
	if err := llm.WaitInFlight(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The held request never answers: the grace period ends the process.
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after the grace period; stderr:\n%s", code, p.stderr.String())
	}
	if out := p.output(); out != "" {
		t.Fatalf("stdout = %q; want nothing (the request was cut off)", out)
	}
	llm.Release()
	restartAndExpect(t, path, "echo: stuck question\n")
}

func TestE2EStdinEOFExitsAfterAnswer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	llm.Hold()
	path := writeConfig(t, testConfig(t.TempDir(), llm.BaseURL(), ""))
	p := startBinary(t, nil, "--config", path)
	p.send("one")
	p.send("two")
	if err := llm.WaitInFlight(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	p.closeInput()
	llm.Release()
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr.String())
	}
	if out := p.output(); out != "echo: one\necho: two\n" {
		t.Fatalf("stdout = %q; want both answers before the exit", out)
	}
}

func TestE2ENoSecretsInDebugLogs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	const (
		llmKey    = "sk-llm-DEBUG-SECRET-777"
		serverKey = "srv-DEBUG-SECRET-888"
	)
	llm := providertest.NewOpenAI(t)
	llm.RequireKey(llmKey)
	bot := telegramtest.New(t, tgToken)
	y := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)
	y = strings.Replace(y, "api_key: test-key", "api_key: ${LLM_KEY}", 1)
	y = strings.Replace(y, "console: { enabled: false }", "console: { enabled: true }", 1)
	y = strings.Replace(y, `listen: "127.0.0.1:0"`, `listen: "127.0.0.1:0"`+"\n  api_key: ${OPENTALON_API_KEY}", 1)
	path := writeConfig(t, y)
	p := startBinary(t, []string{"LLM_KEY=" + llmKey, "OPENTALON_API_KEY=" + serverKey},
		"--config", path, "--log-level", "debug", "run")

	p.send("console question")
	p.waitLine("echo: console question")
	alice := telegramtest.User(42, "alice")
	bot.AddUpdate(bot.Private(alice, "telegram question"))
	reply := bot.WaitSent(t, 1, 30*time.Second)[0]
	if !strings.Contains(reply.Text, "echo: telegram question") {
		t.Fatalf("telegram reply %q", reply.Text)
	}
	bot.AddUpdate(bot.Private(alice, "/status"))
	bot.WaitSent(t, 2, 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr.String())
	}
	logs := p.stderr.String()
	if !strings.Contains(logs, "level=DEBUG") {
		t.Fatalf("no debug lines logged; the test would prove nothing:\n%s", logs)
	}
	tokenSecret := strings.SplitN(tgToken, ":", 2)[1]
	for _, s := range []string{llmKey, serverKey, tgToken, tokenSecret} {
		if strings.Contains(logs, s) {
			t.Errorf("stderr contains the secret %q", s)
		}
	}
}

// restartAndExpect starts the binary on config path with no input and
// checks it answers what was left queued (exactly want) and exits 0.
func restartAndExpect(t *testing.T, path, want string) {
	t.Helper()
	q := startBinary(t, nil, "--config", path, "run")
	q.closeInput()
	if code := q.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("restart exit code %d; stderr:\n%s", code, q.stderr.String())
	}
	if out := q.output(); out != want {
		t.Fatalf("restart stdout = %q; want %q answered once", out, want)
	}
}

// A SIGHUP, sent by an operator who expects it to reload the config, used
// to kill the gateway on the spot: no graceful shutdown, and a death
// systemd's Restart=on-failure counts as clean, so the bot stayed down.
// It is a warning now that says to restart, and the gateway answers on.
// (A service has no controlling terminal: the SIGHUP was sent.)
func TestE2ESIGHUPKeepsTheGatewayRunning(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	path := writeConfig(t, testConfig(dir, llm.BaseURL(), ""))
	p := startService(t, nil, "--config", path, "run")
	p.send("first question")
	p.waitLine("echo: first question")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitStderr("SIGHUP ignored")
	if s := p.stderr.String(); !strings.Contains(s, "restart it to apply a change") {
		t.Fatalf("the SIGHUP warning does not say to restart:\n%s", s)
	}
	p.send("second question")
	p.waitLine("echo: second question")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGHUP then SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
}

// A gateway started on a terminal (an SSH session, a terminal window)
// with channels besides the console: the terminal's hang-up ends it, as
// it always did, whatever its channels. Kept running, it would answer on
// unseen, holding the data directory against the next start.
func TestE2EHangUpEndsAGatewayOnATerminal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	dir := t.TempDir()
	path := writeConfig(t, telegramConfig(dir, llm.BaseURL(), bot.URL))
	master, slave := openPTY(t)
	cmd := exec.Command(os.Args[0], "--config", path, "run")
	cmd.Env = append(childEnv(), "OPENTALON_E2E_MAIN=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	scr := &screen{eof: make(chan struct{})}
	go scr.read(master)
	// Up and answering on Telegram.
	bot.AddUpdate(bot.Private(telegramtest.User(42, "alice"), "hello"))
	bot.WaitSent(t, 1, 20*time.Second)

	master.Close() // the terminal goes away: the kernel sends SIGHUP
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("after the hang-up: %v; want the gateway ended by it", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the gateway still ran 30s after its terminal hung up; the terminal showed:\n%s", scr.String())
	}
}
