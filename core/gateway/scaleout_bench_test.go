package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// sleepyAgent answers after the LLM's latency, like a provider's wait,
// and records when the LLM's wait began and ended.
type sleepyAgent struct {
	latency time.Duration
	s       *stamps
}

func (a sleepyAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.s.mu.Lock()
	a.s.llmStart[t.Text] = time.Now()
	a.s.mu.Unlock()
	defer func() {
		a.s.mu.Lock()
		a.s.llmEnd[t.Text] = time.Now()
		a.s.mu.Unlock()
	}()
	select {
	case <-time.After(a.latency):
	case <-ctx.Done():
		return core.Answer{}, ctx.Err()
	}
	text := "answer to " + t.Text
	return core.Answer{Text: text, Model: "fake/m", TaskType: "chat", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// stamps records when each message was accepted and answered.
type stamps struct {
	mu       sync.Mutex
	accepted map[string]time.Time
	llmStart map[string]time.Time
	llmEnd   map[string]time.Time
	answered map[string]time.Time
	done     chan struct{}
	want     int
}

// stampChannel is one replica's channel "fake": it records the answer.
type stampChannel struct{ s *stamps }

func (c stampChannel) Name() string                               { return "fake" }
func (c stampChannel) Run(ctx context.Context, _ core.Sink) error { <-ctx.Done(); return nil }
func (c stampChannel) Format(text string) []string                { return []string{text} }
func (c stampChannel) Close() error                               { return nil }
func (c stampChannel) Send(_ context.Context, _ core.Outbound, part string) (string, error) {
	id := strings.TrimPrefix(part, "answer to ")
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if _, ok := c.s.answered[id]; !ok {
		c.s.answered[id] = time.Now()
		if len(c.s.answered) == c.s.want {
			close(c.s.done)
		}
	}
	return "p-" + id, nil
}

// BenchmarkScaleOut: b.N messages over 1,000 conversations accepted
// round-robin by N gateways (replicas, each with its own store handle and
// queue.workers 4) on one database, answered by a fake LLM with a fixed
// latency. Reports messages per second and the latency the gateway adds
// to the LLM's (accept → answer sent, less the LLM's wait), p50 and p99.
// load=sat offers every message at once (throughput); load=50% and 80%
// offer them evenly at that share of the capacity (replicas × 4 workers /
// LLM latency) and report the latency added before the LLM's wait (accept
// → LLM called) and after it (LLM answered → answer sent), p50 and p99.
// Run with a fixed count, e.g.
//
//	go test -run - -bench 'ScaleOut/.*/.*/llm=2s/load=sat' -benchtime 40x ./core/gateway/
//
// With PostgreSQL the replicas share one private server (store/pgtest);
// all of them, the server and the load share this machine's CPUs.
func BenchmarkScaleOut(b *testing.B) {
	for _, latency := range []time.Duration{0, 200 * time.Millisecond, 2 * time.Second} {
		loads := []float64{0}
		if latency > 0 {
			loads = append(loads, 0.5, 0.8)
		}
		for _, load := range loads {
			name := "sat"
			if load > 0 {
				name = fmt.Sprintf("%.0f%%", 100*load)
			}
			b.Run(fmt.Sprintf("sqlite/replicas=1/llm=%s/load=%s", latency, name), func(b *testing.B) { scaleOut(b, "sqlite", 1, latency, load) })
			for _, n := range []int{1, 2, 4} {
				b.Run(fmt.Sprintf("postgres/replicas=%d/llm=%s/load=%s", n, latency, name), func(b *testing.B) { scaleOut(b, "postgres", n, latency, load) })
			}
		}
	}
}

func scaleOut(b *testing.B, engine string, replicas int, latency time.Duration, load float64) {
	const workers = 4
	const conversations = 1000
	dir := b.TempDir()
	var dsn string
	if engine == "postgres" {
		dsn = pgtest.DSN(b)
	}
	s := &stamps{accepted: map[string]time.Time{}, llmStart: map[string]time.Time{}, llmEnd: map[string]time.Time{},
		answered: map[string]time.Time{}, done: make(chan struct{}), want: b.N}
	var every time.Duration // between two offered messages (0 = all at once)
	if load > 0 {
		every = time.Duration(float64(latency) / (load * float64(replicas*workers)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var gws []*gateway.Gateway
	var runs sync.WaitGroup
	for i := range replicas {
		o := store.Options{Holder: fmt.Sprint("replica-", i), LeaseTTL: 30 * time.Second}
		if engine == "postgres" {
			o.Postgres = &store.Postgres{DSN: dsn}
		} else {
			o.SoleClaimer = true
		}
		db, err := store.Open(context.Background(), dir, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		g := gateway.New(gateway.Options{Store: db, Agent: sleepyAgent{latency, s}, Workers: workers, MaxAttempts: 3, MaxPending: 1000, LeaseTTL: 30 * time.Second})
		g.AddChannel(stampChannel{s})
		gws = append(gws, g)
		runs.Add(1)
		go func() {
			defer runs.Done()
			g.Run(ctx, 5*time.Second)
		}()
	}
	defer func() {
		cancel()
		runs.Wait()
	}()
	time.Sleep(100 * time.Millisecond) // the gateways are running
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if every > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		}
		id := fmt.Sprint("m", i)
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: fmt.Sprint("c", i%conversations)}, MessageID: id,
			UserID: "u", Text: id, Mentioned: true, Private: true, ReceivedAt: time.Now()}
		s.mu.Lock()
		s.accepted[id] = time.Now()
		s.mu.Unlock()
		if err := gws[i%replicas].Accept(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d answered", len(s.answered), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	s.mu.Lock()
	var added, pre, post []float64
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for id, at := range s.answered {
		added = append(added, ms(at.Sub(s.accepted[id])-latency))
		pre = append(pre, ms(s.llmStart[id].Sub(s.accepted[id])))
		post = append(post, ms(at.Sub(s.llmEnd[id])))
	}
	s.mu.Unlock()
	pct := func(v []float64, p int) float64 {
		slices.Sort(v)
		return v[len(v)*p/100]
	}
	if load == 0 {
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(pct(added, 50), "p50-added-ms")
		b.ReportMetric(pct(added, 99), "p99-added-ms")
		return
	}
	b.ReportMetric(pct(pre, 50), "p50-pre-ms")
	b.ReportMetric(pct(pre, 99), "p99-pre-ms")
	b.ReportMetric(pct(post, 50), "p50-post-ms")
	b.ReportMetric(pct(post, 99), "p99-post-ms")
}
