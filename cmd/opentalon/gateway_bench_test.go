package main

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// BenchmarkGatewayOverhead drives the whole in-process gateway through the
// console channel against an instant fake LLM on loopback, one message at
// a time. It reports:
//   - pre-llm-p50/p99-ms: from the line written to the console until the
//     fake LLM received the request (queue commit, claim, session, history,
//     routing: everything the gateway adds before the LLM);
//   - reply-p50/p99-ms: from the line written until the answer was printed
//     (including the LLM round trip, the reply commit and delivery).
//
// Run: go test -run XXX -bench GatewayOverhead -benchtime 500x ./cmd/opentalon
func BenchmarkGatewayOverhead(b *testing.B) {
	fake := providertest.NewOpenAI(b)
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	fake.SetReply(func(r providertest.Received) providertest.Script {
		mu.Lock()
		arrived[r.LastUser()] = time.Now()
		mu.Unlock()
		return providertest.Echo(r)
	})
	// Keep the history short so every message costs the same.
	cfg := parseConfig(b, testConfig(b.TempDir(), fake.BaseURL(), ""))
	h := startApp(b, cfg)
	h.send("warm up")
	h.expect("echo: warm up")
	pre := make([]time.Duration, 0, b.N)
	total := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%50 == 49 {
			b.StopTimer()
			h.send("/new")
			h.next()
			b.StartTimer()
		}
		msg := fmt.Sprintf("message %d", i)
		start := time.Now()
		h.send(msg)
		h.expect("echo: " + msg)
		total = append(total, time.Since(start))
		mu.Lock()
		pre = append(pre, arrived[msg].Sub(start))
		mu.Unlock()
	}
	b.StopTimer()
	report(b, "pre-llm", pre)
	report(b, "reply", total)
}

func report(b *testing.B, name string, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))]) / 1e6 }
	b.ReportMetric(q(0.50), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
}
