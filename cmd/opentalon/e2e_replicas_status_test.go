package main

// /status on replicas of one bot (issue 23): it describes the bot,
// whichever replica answers it.

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicaStatusSaysWhenTheBotLastGotAnUpdate: two replicas in
// polling mode; A holds the poller and takes in a question and, while
// the question is with the LLM, /status (which waits its turn behind
// it). A is killed; B, which never received an update itself, answers
// both. /status still says when the bot last got an update, as on a
// single machine — not nothing because B polled nothing.
func TestE2EReplicaStatusSaysWhenTheBotLastGotAnUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes and kills one")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	bin := releaseBinary(t)
	start := func() *binProc {
		y := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		y = insertUnder(y, "queue", "  lease_ttl: 2s\n")
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
		t.Cleanup(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(60 * time.Second)
		})
		return p
	}
	a := start()
	waitLog(t, a, pollerHeld)
	b := start()
	waitLog(t, b, "connected to Telegram")

	alice := telegramtest.User(7300, "alice")
	llm.Hold()
	bot.AddUpdate(bot.Private(alice, "what is a monad?"))
	for deadline := time.Now().Add(30 * time.Second); llm.InFlight() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the question never reached the LLM; A's log:\n%s", tail(a.stderr.String(), 40))
		}
	}
	status := bot.AddUpdate(bot.Private(alice, "/status"))
	// A took /status in: its next getUpdates confirms it to Telegram,
	// which then gives it to no one else.
	bot.WaitFor(t, "A to take /status in", 30*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool {
		return bot.Confirmed() > status
	})
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.exitCode(30 * time.Second)
	llm.Release()

	reads := reading(bot)
	var got string
	bot.WaitFor(t, "/status answered by B", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent {
			if text := reads(s); strings.Contains(text, "Model:") {
				got = text
				return true
			}
		}
		return false
	})
	if !strings.Contains(got, "\ntelegram: last update ") {
		t.Errorf("/status on the replica that took over answered:\n%s\nwant it to say when the bot last got an update (a line \"telegram: last update … ago\")", got)
	}
	if strings.Contains(b.stderr.String(), "update received") {
		t.Errorf("B received an update itself, so the test shows nothing; its log:\n%s", tail(b.stderr.String(), 40))
	}
}
