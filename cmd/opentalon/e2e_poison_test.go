package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2EKillsCountAgainstWhatRanNotWhatWaited: a message whose LLM call
// never ends holds the local model's one slot while another chat's
// message, claimed by the second worker, waits for it; the process is
// killed then. With queue.max_attempts: 1 the poison-message guard gives
// up on the message that ran at the next start, and the one that only
// waited is answered: a kill counts against what ran, not against what
// waited behind it.
func TestE2EKillsCountAgainstWhatRanNotWhatWaited(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	llm := providertest.NewOpenAI(t)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) }) // before the server closes
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if r.LastUser() == "poison" {
			<-stuck
		}
		return providertest.Echo(r)
	})
	bot := telegramtest.New(t, tgToken)
	alice, bob := telegramtest.User(4101, "alice"), telegramtest.User(4102, "bob")
	// The fake LLM is on 127.0.0.1: a local model, one call at a time.
	cfg := writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)+"queue:\n  workers: 2\n  max_attempts: 1\n")
	answered := func(chat int64, prefix string) bool {
		for _, s := range bot.Sent() {
			if s.ChatID == chat && strings.HasPrefix(s.Text, prefix) {
				return true
			}
		}
		return false
	}
	waitFor := func(what string, p *binProc, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not come; sent %+v; stderr:\n%s", what, bot.Sent(), p.stderr.String())
			}
		}
	}

	p := startBinary(t, nil, "--config", cfg, "--log-level", "debug", "run")
	bot.AddUpdate(bot.Private(alice, "poison"))
	if err := llm.WaitRequests(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	bot.AddUpdate(bot.Private(bob, "innocent"))
	waitFor("the second message's wait for the slot", p, func() bool {
		return logHas(p.stderr, fmt.Sprintf("conv=telegram:%d", bob.ID), "waits for its provider's slot")
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(30 * time.Second); code != -1 {
		t.Fatalf("exit code %d, want killed", code)
	}

	p = startBinary(t, nil, "--config", cfg, "--log-level", "debug", "run")
	waitFor("the waiting message's answer and the poison's apology", p, func() bool {
		return answered(bob.ID, "echo: innocent") && answered(alice.ID, "Sorry")
	})
	if answered(bob.ID, "Sorry") {
		t.Errorf("the message that only waited got an apology; sent %+v", bot.Sent())
	}
}

// logHas reports whether a line of l has every one of parts.
func logHas(l *lockedBuf, parts ...string) bool {
	for _, line := range strings.Split(l.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}
