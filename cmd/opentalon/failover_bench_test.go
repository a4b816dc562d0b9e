package main

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

// BenchmarkPerfFailover (issue 23): three replicas of the stripped
// binary on one local PostgreSQL, the Telegram bot in polling mode,
// defaults for every lease. Each iteration stops the replica polling
// Telegram with SIGTERM, then kills the next one with SIGKILL, handing a
// new message to the fake Bot API at that moment, and reports:
//   - handover-poll-s: from the SIGTERM to the next getUpdates (a
//     stopping replica releases the lease; issue 23: under 2 s);
//   - failover-poll-s: from the kill to the next getUpdates (the other
//     replica took the bot's lease, which the dead one no longer renews:
//     cluster.lease_ttl, 10 s, at the most, plus one lease poll);
//   - failover-answer-s: from the kill to that message's reply.
//
// A message the killed replica was answering waits for its claim to run
// out (queue.lease_ttl, 30 s by default) instead; README, "A replica
// dies".
//
//	go test -run '^$' -bench PerfFailover -benchtime 3x ./cmd/opentalon
func BenchmarkPerfFailover(b *testing.B) {
	bin := buildStripped(b)
	llm := providertest.NewOpenAI(b)
	var handovers, polls, answers []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		dsn := pgtest.DSN(b) // a database of its own: the dead holder's lease is not left for the next
		tg := telegramtest.New(b, perfToken)
		gs := make([]*binaryProcess, 3)
		for i := range gs {
			gs[i] = startGateway(b, bin, perfConfigOn(b, b.TempDir(), tg.URL, llm.BaseURL(), dsn))
		}
		firstPoll(b, tg, gs[0])
		// holder waits for a live replica other than not whose log says
		// it took the bot's lease last.
		holder := func(not int) int {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				for i, g := range gs {
					if g != nil && i != not && strings.Contains(g.stderr.String(), pollerHeld) {
						return i
					}
				}
			}
			b.Fatalf("no replica says %q", pollerHeld)
			return -1
		}
		pollAfter := func(at time.Time) (time.Duration, bool) {
			for _, c := range tg.Calls("getUpdates") {
				if c.At.After(at) {
					return c.At.Sub(at), true
				}
			}
			return 0, false
		}
		first := holder(-1)
		stopped := time.Now()
		gs[first].stop(b)
		gs[first] = nil
		second := holder(first)
		// The new holder's first poll: the first after its log says it
		// took the lease (the log's time has milliseconds).
		took := heldAt(b, gs[second].stderr.String())
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if d, ok := pollAfter(took); ok {
				handovers = append(handovers, took.Add(d).Sub(stopped))
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("no poll after the stop")
			}
		}

		// A chat the replica answered and has finished: the message after
		// the kill is in another chat, so it does not wait for an item the
		// dead replica may still hold (see above).
		before, after := telegramtest.User(int64(20000+2*n), ""), telegramtest.User(int64(20001+2*n), "")
		n++
		tg.AddUpdate(tg.Private(before, "before the kill"))
		tg.WaitSent(b, 1, 30*time.Second)
		if err := gs[second].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		tg.AddUpdate(tg.Private(after, "after the kill"))
		sent := tg.WaitSent(b, 2, time.Minute)
		answers = append(answers, sent[1].At.Sub(killed))
		if d, ok := pollAfter(killed); ok {
			polls = append(polls, d)
		}
		<-gs[second].exited
		gs[second] = nil
		for _, g := range gs {
			if g != nil {
				g.stop(b)
			}
		}
		tg.Close()
		b.StartTimer()
	}
	if len(polls) == 0 {
		b.Fatal("no poll after a kill")
	}
	b.ReportMetric(median(handovers).Seconds(), "handover-poll-s")
	b.ReportMetric(median(polls).Seconds(), "failover-poll-s")
	b.ReportMetric(median(answers).Seconds(), "failover-answer-s")
	b.Logf("polls after the stop: %v; after the kill: %v; answers: %v", fmtDurations(handovers), fmtDurations(polls), fmtDurations(answers))
}

func fmtDurations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprint(s)
}

// heldAt is the time of the last log line of log saying the replica took
// the bot's lease, a millisecond early (the log's time is truncated).
func heldAt(b *testing.B, log string) time.Time {
	b.Helper()
	i := strings.LastIndex(log, pollerHeld)
	line := log[strings.LastIndex(log[:max(i, 0)], "\n")+1:]
	ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if i < 0 || err != nil {
		b.Fatalf("no time on the line saying %q: %q (%v)", pollerHeld, line, err)
	}
	return at.Add(-time.Millisecond)
}
