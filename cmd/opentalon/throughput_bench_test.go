package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// Throughput on one machine: how many messages a second the gateway
// carries on SQLite when every answer takes the LLM 2 s, over 1,000
// conversations, and the latency it adds at 50% and 80% of that.
const (
	tpConversations = 1000
	tpLLMLatency    = 2 * time.Second
	// tpStep is how long each offered rate is kept up.
	tpStep = 5 * time.Second
	// tpCarried is the added latency (receipt → LLM request) whose p99 a
	// carried rate stays under: past it a backlog builds.
	tpCarried = 250 * time.Millisecond
)

// tpRates are the offered rates tried, in messages per second. With one
// message in flight per conversation and 2 s per answer, 1,000
// conversations cannot carry more than 500 a second.
var tpRates = []int{25, 50, 100, 200, 300, 400, 450}

// BenchmarkPerfThroughput runs the App in-process against the fake Bot
// API (polling) and a fake LLM that answers after 2 s, with queue.workers
// and the LLM semaphores at 1,000 and channels.telegram.messages_per_second
// raised past the rates tried (the gateway's capacity, not Telegram's
// limit of 30 messages a second). It offers rising rates (tpRates) for
// tpStep each, open loop, over tpConversations chats, and reports the
// highest carried (every message answered, added p99 under tpCarried) as
// capacity-msg/s, the first that was not as saturates-at-msg/s, and then,
// at 50% and 80% of the capacity, the added latency from handing the
// update over to the LLM request (in-p50/p99-ms) and from the LLM's
// answer to the reply at the Bot API (out-p50/p99-ms), and the process's
// CPU use (cpu-%, of one core; the fakes run in the same process, so the
// gateway alone carries at least this much; -cpuprofile shows where its
// time goes under load):
//
//	go test -run '^$' -bench 'PerfThroughput$' -benchtime 1x ./cmd/opentalon
func BenchmarkPerfThroughput(b *testing.B) {
	measureThroughputOn(b, "")
}

// BenchmarkPerfThroughputPostgres is BenchmarkPerfThroughput with the
// state on a local PostgreSQL (store/pgtest, durable commits: fsync and
// synchronous_commit on; its server's CPU is not counted in cpu-%), one
// replica, beside the SQLite figures:
//
//	go test -run '^$' -bench PerfThroughputPostgres -benchtime 1x ./cmd/opentalon
func BenchmarkPerfThroughputPostgres(b *testing.B) {
	measureThroughputOn(b, pgtest.DurableDSN(b))
}

// measureThroughputOn runs the in-process throughput benchmark on the
// PostgreSQL database of dsn ("" = SQLite).
func measureThroughputOn(b *testing.B, dsn string) {
	tp, llm := newTPRun(b)
	cfg := loadConfigFile(b, tpConfig(b, tp.tg.URL, llm.BaseURL(), dsn))
	defer runBenchApp(b, cfg, AppOptions{})()
	tp.cpu = processCPU
	measureThroughput(b, tp)
}

// BenchmarkPerfThroughputBinary is BenchmarkPerfThroughput with the
// gateway as its own process, the stripped binary (as
// BenchmarkPerfMessage runs it); cpu-% is that process's alone. On a
// 2-core machine the fakes' process and the gateway's then take turns
// on the cores at the operating system's pace (each runtime runs as
// many threads as cores), which a serialized resource, such as the
// SQLite writer, feels as a tail:
//
//	go test -run '^$' -bench PerfThroughputBinary -benchtime 1x ./cmd/opentalon
func BenchmarkPerfThroughputBinary(b *testing.B) {
	tp, llm := newTPRun(b)
	bin := buildStripped(b)
	g := startGateway(b, bin, tpConfig(b, tp.tg.URL, llm.BaseURL(), ""))
	b.Cleanup(func() { g.stop(b) })
	firstPoll(b, tp.tg, g)
	tp.cpu = func() time.Duration { return g.cpuTime(b) }
	measureThroughput(b, tp)
}

// newTPRun starts the throughput benchmarks' fakes.
func newTPRun(b *testing.B) (*tpRun, *providertest.Server) {
	llm := providertest.NewOpenAI(b)
	// The fakes share the process with the in-process gateway: what they
	// kept of every request (about 100 MB of LLM request bodies over a
	// run) made each garbage collection of that heap take one of the
	// two cores for 100-280 ms, a stall the gateway's p99 then showed.
	// They are measured by their callbacks and Sent instead.
	llm.Forget()
	tp := &tpRun{llmAt: map[string]time.Time{}, tg: telegramtest.New(b, perfToken)}
	llm.SetReply(func(rec providertest.Received) providertest.Script {
		tp.sawLLM(rec.LastUser())
		time.Sleep(tpLLMLatency)
		return providertest.Echo(rec)
	})
	tp.users = make([]*models.User, tpConversations)
	for i := range tp.users {
		tp.users[i] = telegramtest.User(int64(20000+i), "")
	}
	return tp, llm
}

// tpConfig writes the throughput benchmarks' config, on the PostgreSQL
// database of dsn ("" = SQLite), and returns its path.
func tpConfig(b *testing.B, tgURL, llmURL, dsn string) string {
	b.Helper()
	yaml := testConfig(b.TempDir(), llmURL, fmt.Sprintf(`channels:
  console: { enabled: false }
  telegram:
    enabled: true
    token: %q
    api_url: %q
    ack_reaction: ""
    messages_per_second: 100000
queue:
  workers: %d
llm:
  max_concurrent_cloud: %d
  max_concurrent_local: %d
`, perfToken, tgURL, tpConversations, tpConversations, tpConversations))
	yaml = onPostgres(yaml, dsn)
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// measureThroughput is the throughput benchmarks' loop and report.
func measureThroughput(b *testing.B, tp *tpRun) {
	tp.tg.Forget() // see newTPRun
	for b.Loop() {
		// Warm-up: every conversation opens its session.
		tp.offer(b, "warm", 250, tpConversations)
		capacity, saturates := 0, 0
		for _, rate := range tpRates {
			s := tp.offer(b, fmt.Sprintf("r%d", rate), rate, rate*int(tpStep/time.Second))
			b.Logf("offered %d msg/s: answered %d/%d, in p50 %.1f ms p99 %.1f ms, out p50 %.1f ms p99 %.1f ms, cpu %.0f%%",
				rate, s.answered, s.n, ms(s.inP50), ms(s.inP99), ms(s.outP50), ms(s.outP99), s.cpu)
			b.ReportMetric(ms(s.inP99), fmt.Sprintf("r%d-in-p99-ms", rate))
			if s.answered < s.n || s.inP99 > tpCarried {
				saturates = rate
				break
			}
			capacity = rate
		}
		b.ReportMetric(float64(capacity), "capacity-msg/s")
		b.ReportMetric(float64(saturates), "saturates-at-msg/s")
		if capacity == 0 {
			continue
		}
		for _, share := range []int{50, 80} {
			rate := capacity * share / 100
			s := tp.offer(b, fmt.Sprintf("at%d", share), rate, rate*int(tpStep/time.Second))
			b.ReportMetric(ms(s.inP50), fmt.Sprintf("at%d-in-p50-ms", share))
			b.ReportMetric(ms(s.inP99), fmt.Sprintf("at%d-in-p99-ms", share))
			b.ReportMetric(ms(s.outP50), fmt.Sprintf("at%d-out-p50-ms", share))
			b.ReportMetric(ms(s.outP99), fmt.Sprintf("at%d-out-p99-ms", share))
			b.ReportMetric(s.cpu, fmt.Sprintf("at%d-cpu-%%", share))
		}
	}
}

// tpRun is the throughput benchmark's fakes and what they saw.
type tpRun struct {
	tg *telegramtest.Server
	// cpu is the CPU time the measured process has used.
	cpu   func() time.Duration
	users []*models.User
	next  int // the next user to write

	mu    sync.Mutex
	llmAt map[string]time.Time
}

func (tp *tpRun) sawLLM(text string) {
	at := time.Now()
	tp.mu.Lock()
	tp.llmAt[text] = at
	tp.mu.Unlock()
}

// tpStats is one offered rate's outcome.
type tpStats struct {
	n, answered                  int
	inP50, inP99, outP50, outP99 time.Duration
	cpu                          float64
}

// offer sends n messages at rate a second, round robin over the
// conversations, waits for their answers (at most the LLM's latency
// plus 20 s after the last) and measures them.
func (tp *tpRun) offer(b *testing.B, tag string, rate, n int) tpStats {
	b.Helper()
	sentBefore := tp.tg.SentCount()
	handed := make(map[string]time.Time, n)
	cpu0, t0 := tp.cpu(), time.Now()
	for i := range n {
		if d := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d)
		}
		text := fmt.Sprintf("%s %d", tag, i)
		u := tp.tg.Private(tp.users[tp.next%len(tp.users)], text)
		tp.next++
		handed[text] = time.Now()
		tp.tg.AddUpdate(u)
	}
	deadline := time.Now().Add(tpLLMLatency + 20*time.Second)
	var sent []telegramtest.Sent
	// Counted, not copied, while the replies come in: the fake's lock
	// would otherwise hold up its handlers.
	for tp.tg.SentCount()-sentBefore < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	sent = tp.tg.Sent()[sentBefore:]
	cpu := float64(tp.cpu()-cpu0) / float64(time.Since(t0)) * 100
	var in, out []time.Duration
	tp.mu.Lock()
	for _, s := range sent {
		text, ok := strings.CutPrefix(s.Text, "echo: ")
		at, mine := handed[text]
		if !ok || !mine {
			continue
		}
		llmAt := tp.llmAt[text]
		in = append(in, llmAt.Sub(at))
		out = append(out, s.At.Sub(llmAt.Add(tpLLMLatency)))
	}
	tp.mu.Unlock()
	st := tpStats{n: n, answered: len(in), cpu: cpu}
	if len(in) > 0 {
		st.inP50, st.inP99 = percentile(in, 0.5), percentile(in, 0.99)
		st.outP50, st.outP99 = percentile(out, 0.5), percentile(out, 0.99)
	}
	return st
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
