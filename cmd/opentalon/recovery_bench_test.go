package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// BenchmarkPerfRecovery measures how soon a backlog is answered once its
// provider is back. recoveryChats private chats each send a message
// while the fake LLM answers every call with 429 "Retry-After: 20"; it
// answers again recoveryLimited later. Reported:
//   - back-p50-s, back-max-s: from the provider's return to each answer;
//   - apologies: messages given up (want 0: queue.max_wait is 5m).
//
// "restarted" kills the process (SIGKILL) 24 s into the limited phase,
// after the second 429 (the cooldown ladder's second step), and starts it
// again: what it knows of the provider (the cooldown, the server's
// Retry-After) then comes from the database.
//
//	go test -run '^$' -bench PerfRecovery -benchtime 1x ./cmd/opentalon
func BenchmarkPerfRecovery(b *testing.B) {
	bin := buildStripped(b)
	for _, restart := range []bool{false, true} {
		name := "steady"
		if restart {
			name = "restarted"
		}
		b.Run(name, func(b *testing.B) {
			var backs []time.Duration
			apologies := 0
			for b.Loop() {
				b.StopTimer()
				d, sorry := recoverOnce(b, bin, restart)
				backs = append(backs, d...)
				apologies += sorry
				b.StartTimer()
			}
			if len(backs) == 0 {
				b.Fatalf("no message of the backlog was answered (%d apologies)", apologies)
			}
			b.ReportMetric(median(backs).Seconds(), "back-p50-s")
			b.ReportMetric(percentile(backs, 1).Seconds(), "back-max-s")
			b.ReportMetric(float64(apologies), "apologies")
		})
	}
}

const (
	recoveryChats   = 12
	recoveryLimited = 30 * time.Second
)

// recoverOnce runs one limited phase and the return; it returns, for each
// message answered, how long after the return it was, and how many were
// given up.
func recoverOnce(b *testing.B, bin string, restart bool) (backs []time.Duration, apologies int) {
	b.Helper()
	var limited atomic.Bool
	limited.Store(true)
	llm := providertest.NewOpenAI(b)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if limited.Load() {
			return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "20"}, Body: `{"error":{"message":"slow down","type":"rate_limit"}}`}
		}
		return providertest.Echo(r)
	})
	tg := telegramtest.New(b, perfToken)
	defer tg.Close()
	cfg := perfConfigWith(b, b.TempDir(), tg.URL, llm.BaseURL(), "", "queue:\n  max_wait: 5m\n")
	g := startGateway(b, bin, cfg)
	defer func() { g.stop(b) }()
	firstPoll(b, tg, g)
	t0 := time.Now()
	for i := range recoveryChats {
		tg.AddUpdate(tg.Private(telegramtest.User(int64(20000+i), ""), fmt.Sprintf("backlog %d", i)))
	}
	if restart {
		time.Sleep(time.Until(t0.Add(24 * time.Second)))
		if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		<-g.exited
		polls := len(tg.Calls("getUpdates"))
		g = startGateway(b, bin, cfg)
		tg.WaitFor(b, "the restarted gateway polling", 30*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
			n := 0
			for _, c := range calls {
				if c.Method == "getUpdates" {
					n++
				}
			}
			return n > polls
		})
	}
	time.Sleep(time.Until(t0.Add(recoveryLimited)))
	back := time.Now()
	limited.Store(false)
	answered := map[int64]time.Time{}
	tg.WaitFor(b, "every message of the backlog answered", 4*time.Minute, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent {
			switch {
			case strings.HasPrefix(s.Text, "echo: backlog"):
				if _, ok := answered[s.ChatID]; !ok {
					answered[s.ChatID] = s.At
				}
			case strings.HasPrefix(s.Text, "Sorry"):
				if _, ok := answered[s.ChatID]; !ok {
					answered[s.ChatID] = time.Time{}
				}
			}
		}
		return len(answered) == recoveryChats
	})
	for _, at := range answered {
		if at.IsZero() {
			apologies++
			continue
		}
		backs = append(backs, max(at.Sub(back), 0))
	}
	return backs, apologies
}
