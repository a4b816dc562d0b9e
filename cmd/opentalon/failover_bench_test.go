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

// BenchmarkPerfFailover (issue 23): two replicas of the stripped binary
// on one local PostgreSQL, the Telegram bot in polling mode, defaults
// for every lease. Each iteration kills the replica polling Telegram
// with SIGKILL, hands a new message to the fake Bot API at that moment,
// and reports, from the kill:
//   - failover-poll-s: the first getUpdates (the other replica took the
//     bot's lease, which the dead one no longer renews: cluster.lease_ttl,
//     10 s, at the most, plus one lease poll);
//   - failover-answer-s: that message's reply.
//
// A message the killed replica was answering waits for its claim to run
// out (queue.lease_ttl, 30 s by default) instead; README, "A replica
// dies".
//
//	go test -run '^$' -bench PerfFailover -benchtime 3x ./cmd/opentalon
func BenchmarkPerfFailover(b *testing.B) {
	bin := buildStripped(b)
	llm := providertest.NewOpenAI(b)
	var polls, answers []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		dsn := pgtest.DSN(b) // a database of its own: the dead holder's lease is not left for the next
		tg := telegramtest.New(b, perfToken)
		var gs [2]*binaryProcess
		for i := range gs {
			gs[i] = startGateway(b, bin, perfConfigOn(b, b.TempDir(), tg.URL, llm.BaseURL(), dsn))
		}
		firstPoll(b, tg, gs[0])
		holder := -1
		deadline := time.Now().Add(30 * time.Second)
		for holder < 0 {
			for i, g := range gs {
				if strings.Contains(g.stderr.String(), pollerHeld) {
					holder = i
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("no replica says %q", pollerHeld)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// A chat the dead replica answered and has finished: the message
		// after the kill is in another chat, so it does not wait for an
		// item the dead replica may still hold (see above).
		before, after := telegramtest.User(int64(20000+2*n), ""), telegramtest.User(int64(20001+2*n), "")
		n++
		tg.AddUpdate(tg.Private(before, "before the kill"))
		tg.WaitSent(b, 1, 30*time.Second)

		if err := gs[holder].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		killed := time.Now()
		tg.AddUpdate(tg.Private(after, "after the kill"))
		sent := tg.WaitSent(b, 2, time.Minute)
		answers = append(answers, sent[1].At.Sub(killed))
		for _, c := range tg.Calls("getUpdates") {
			if c.At.After(killed) {
				polls = append(polls, c.At.Sub(killed))
				break
			}
		}
		<-gs[holder].exited
		gs[1-holder].stop(b)
		tg.Close()
		b.StartTimer()
	}
	if len(polls) == 0 {
		b.Fatal("no poll after a kill")
	}
	b.ReportMetric(median(polls).Seconds(), "failover-poll-s")
	b.ReportMetric(median(answers).Seconds(), "failover-answer-s")
	b.Logf("polls after the kill: %v; answers: %v", fmtDurations(polls), fmtDurations(answers))
}

func fmtDurations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprint(s)
}
