package slack_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
)

// BenchmarkEnvelopeToPost drives the Slack channel in Socket Mode through
// a real gateway and store with an instant agent: 50 goroutines, each in
// its own Slack thread of one channel, send 20 mentions one after the
// other (the next once the previous answer was posted), 1,000 events per
// iteration. It reports the time from the envelope handed to the fake's
// WebSocket until the fake received the answer's chat.postMessage
// (acknowledgement after the commit, claim, answer, reply commit, ack
// reaction, post), p50 and p99 over all events, and the part of it until
// the agent was asked (to-agent: intake, commit, claim, session). Per-channel pacing is off
// (SendGap -1): with it, 50 threads of one channel share Slack's one
// message per second and the pacing, not the pipeline, is measured.
//
// Run: go test -run XXX -bench EnvelopeToPost -benchtime 1x ./channels/slack
func BenchmarkEnvelopeToPost(b *testing.B) {
	const threads, perThread = 50, 20
	var waiters sync.Map // thread ts → chan slacktest.Post
	srv := slacktest.New(b, botToken, appToken, slacktest.Options{OnPost: func(p slacktest.Post) {
		if ch, ok := waiters.Load(p.ThreadTS); ok {
			ch.(chan slacktest.Post) <- p
		}
	}})
	r := newRigOn(b, srv, setup{})
	srv.WaitConnected(b, 1, wait)
	lat := make([]time.Duration, 0, b.N*threads*perThread)
	pre := make([]time.Duration, 0, b.N*threads*perThread)
	var mu sync.Mutex
	asked := map[string]time.Time{} // question → when the agent got it
	r.agent.answer = func(text string) string {
		mu.Lock()
		asked[text] = time.Now()
		mu.Unlock()
		return "echo: " + text
	}
	b.ResetTimer()
	for i := range b.N {
		var wg sync.WaitGroup
		for g := range threads {
			wg.Go(func() {
				channel := fmt.Sprintf("C%03d", i) // a fresh channel per iteration
				var thread string
				posted := make(chan slacktest.Post, 1)
				for n := range perThread {
					q := fmt.Sprintf("question %d of thread %d in %s", n, g, channel)
					env := srv.Mention("alice", channel, q, thread)
					if thread == "" {
						thread = env.TS
						waiters.Store(thread, posted)
					}
					start := time.Now()
					srv.Deliver(env)
					select {
					case p := <-posted:
						mu.Lock()
						lat = append(lat, p.At.Sub(start))
						pre = append(pre, asked[q].Sub(start))
						mu.Unlock()
					case <-time.After(wait):
						b.Errorf("thread %d: no answer to event %d within %s", g, n, wait)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(quantile(lat, 0.50), "p50-ms")
	b.ReportMetric(quantile(lat, 0.99), "p99-ms")
	b.ReportMetric(quantile(pre, 0.50), "to-agent-p50-ms")
	b.ReportMetric(quantile(pre, 0.99), "to-agent-p99-ms")
	b.ReportMetric(float64(len(lat)), "events")
}

func quantile(d []time.Duration, p float64) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[int(p*float64(len(d)-1))]) / 1e6
}
