package main

// Performance benchmarks of the real binary against the project's targets:
// start to first platform poll, idle RSS, CPU and added latency per
// message, stripped binary size. Each benchmark builds the binary with
// `CGO_ENABLED=0 go build -trimpath -tags grpcnotrace,nethttpomithttp2 -ldflags "-s -w"` (as
// scripts/release.sh) into b.TempDir() and runs it as a
// separate process against a fake Telegram Bot API (telegramtest) and a
// fake OpenAI-compatible LLM (providertest), with the console off and
// the durable SQLite queue in a temp data dir. They run only with -bench:
//
//	go test -run '^$' -bench 'Perf' -benchtime 20x ./cmd/opentalon
//
// (scripts/bench.sh runs them together with the package benchmarks.)

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

const perfToken = "4242:perf-token"

// perfChats is the number of chats BenchmarkPerfMessage rotates over.
const perfChats = 200

// releaseTags are the build tags of a release (scripts/release.sh):
// grpcnotrace leaves out gRPC's request tracing and what it pulls in;
// nethttpomithttp2 leaves out net/http's HTTP/2 (the APIs are called over
// HTTP/1.1).
const releaseTags = "grpcnotrace,nethttpomithttp2"

// buildStripped builds the opentalon binary the way a release is built and
// returns its path. OPENTALON_PERF_SYMBOLS=1 keeps the symbols, for
// profiling the gateway with `perf record -g -p <pid>`.
func buildStripped(b *testing.B) string {
	b.Helper()
	return buildReleaseOf(b, ".", "opentalon")
}

// buildReleaseOf builds the main package in dir (relative to this one)
// as buildStripped builds the gateway, to a file named name.
func buildReleaseOf(b *testing.B, dir, name string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), name)
	ldflags := "-s -w"
	if os.Getenv("OPENTALON_PERF_SYMBOLS") == "1" {
		ldflags = ""
	}
	cmd := exec.Command("go", "build", "-trimpath", "-tags", releaseTags, "-ldflags", ldflags, "-o", out, dir)
	// Static, as scripts/release.sh and the Dockerfile build it (the
	// SQLite driver is pure Go): no dynamic loader or libc at start.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("go build -trimpath -tags %s -ldflags \"-s -w\": %v\n%s", releaseTags, err, stderr.String())
	}
	return out
}

// perfConfig writes a config with only the Telegram channel (polling the
// fake at tgURL) and one OpenAI-compatible provider at llmURL.
func perfConfig(b testing.TB, dataDir, tgURL, llmURL string) string {
	return perfConfigOn(b, dataDir, tgURL, llmURL, "")
}

// perfConfigOn is perfConfig with the state on the PostgreSQL database
// of dsn ("" = SQLite in dataDir).
func perfConfigOn(b testing.TB, dataDir, tgURL, llmURL, dsn string) string {
	b.Helper()
	return perfConfigWith(b, dataDir, tgURL, llmURL, dsn, "")
}

// perfConfigWith is perfConfigOn with more of the config's yaml (extra,
// whole top-level sections).
func perfConfigWith(b testing.TB, dataDir, tgURL, llmURL, dsn, extra string) string {
	b.Helper()
	yaml := testConfig(dataDir, llmURL, fmt.Sprintf(`channels:
  console: { enabled: false }
  telegram:
    enabled: true
    token: %q
    api_url: %q
    ack_reaction: ""
`, perfToken, tgURL)+extra)
	// OPENTALON_PERF_METRICS=on|off runs the HTTP server with the metrics
	// counted or not, to measure their cost on the message path; unset,
	// the server is off.
	switch m := os.Getenv("OPENTALON_PERF_METRICS"); m {
	case "on", "off":
		yaml = strings.Replace(yaml, `listen: ""`, fmt.Sprintf("listen: \"127.0.0.1:0\"\n  metrics: %v", m == "on"), 1)
	case "":
	default:
		b.Fatalf("OPENTALON_PERF_METRICS=%q: use on or off", m)
	}
	yaml = onPostgres(yaml, dsn)
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// onPostgres is a testConfig's yaml with the state on the PostgreSQL
// database of dsn ("" = unchanged, SQLite).
func onPostgres(yaml, dsn string) string {
	if dsn == "" {
		return yaml
	}
	return strings.Replace(yaml, "state:\n", fmt.Sprintf("state:\n  driver: postgres\n  postgres: { dsn: %q }\n", dsn), 1)
}

// binaryProcess is one running opentalon process.
type binaryProcess struct {
	cmd     *exec.Cmd
	started time.Time
	stderr  *lockedBuf
	exited  chan struct{} // closed once the process has been reaped
}

func startGateway(b *testing.B, bin, cfgPath string) *binaryProcess {
	b.Helper()
	g := &binaryProcess{cmd: exec.Command(bin, "--config", cfgPath, "run"), stderr: &lockedBuf{}, exited: make(chan struct{})}
	g.cmd.Env = append(os.Environ(), "OPENTALON_LOG_LEVEL=info")
	g.cmd.Stderr = g.stderr
	g.started = time.Now()
	if err := g.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		g.cmd.Wait()
		close(g.exited)
	}()
	return g
}

// stop ends the process with SIGTERM and waits for it.
func (g *binaryProcess) stop(b *testing.B) {
	b.Helper()
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Kill()
		<-g.exited
		b.Errorf("gateway did not stop within 30s of SIGTERM; stderr:\n%s", g.stderr.String())
	}
}

// rssMiB reads VmRSS of the process.
func (g *binaryProcess) rssMiB(b *testing.B) float64 { return g.statusMiB(b, "VmRSS") }

// statusMiB reads a kB field of /proc/<pid>/status (VmRSS, RssAnon,
// RssFile) in MiB.
func (g *binaryProcess) statusMiB(b *testing.B, field string) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("read /proc status (these benchmarks need Linux): %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("%s %q: %v", field, rest, err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no %s in /proc status", field)
	return 0
}

// cpuTime is the CPU time the process has used: the sum of its threads'
// run times in /proc/<pid>/task/*/schedstat (nanoseconds), or, where
// that is missing, utime+stime of /proc/<pid>/stat (10ms ticks).
func (g *binaryProcess) cpuTime(b *testing.B) time.Duration {
	b.Helper()
	pid := g.cmd.Process.Pid
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatalf("parse %s %q: %v", t, raw, err)
		}
		sum += time.Duration(ns)
	}
	if sum > 0 {
		return sum
	}
	// USER_HZ is 100 on every Linux this runs on.
	return time.Duration(g.statField(b, 14)+g.statField(b, 15)) * 10 * time.Millisecond
}

// minorFaults is the number of minor page faults the process has taken.
// On a virtual machine that shadows its guest's page tables, as this
// benchmark's machine does, each costs tens of microseconds: most of a
// start-up is its faults.
func (g *binaryProcess) minorFaults(b *testing.B) int64 { return g.statField(b, 10) }

// statField is the numeric field n (counted from 1, as proc(5) does) of
// /proc/<pid>/stat.
func (g *binaryProcess) statField(b *testing.B, n int) int64 {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("read /proc stat (these benchmarks need Linux): %v", err)
	}
	// The command name may hold spaces; fields count from after ')',
	// where field 3 (state) begins.
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	v, err := strconv.ParseInt(f[n-3], 10, 64)
	if err != nil {
		b.Fatalf("parse field %d of /proc stat %q: %v", n, stat, err)
	}
	return v
}

// firstPoll waits for the first getUpdates at tg and returns its arrival.
func firstPoll(b *testing.B, tg *telegramtest.Server, g *binaryProcess) time.Time {
	b.Helper()
	var at time.Time
	tg.WaitFor(b, "the first getUpdates", 30*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "getUpdates" {
				at = c.At
				return true
			}
		}
		select {
		case <-g.exited:
			b.Fatalf("gateway exited before polling; stderr:\n%s", g.stderr.String())
		default:
		}
		return false
	})
	return at
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkPerfBinarySize reports the size of the stripped binary.
func BenchmarkPerfBinarySize(b *testing.B) {
	bin := buildStripped(b)
	var size int64
	for b.Loop() {
		fi, err := os.Stat(bin)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
	}
	b.ReportMetric(float64(size)/1e6, "binary-MB")
	b.ReportMetric(float64(size)/(1<<20), "binary-MiB")
}

// BenchmarkPerfStart measures process start (fork/exec included) to the
// first getUpdates at the fake Bot API, as a median over b.N starts, and
// the RSS once the process has sat idle for a second after the first
// start, and its CPU use over the next two idle seconds, with the page
// faults taken until the first poll (start-faults). fresh-db starts on
// an empty data dir (migrations run); existing-db reuses one database.
// floor is the start no gateway built on the same six libraries can beat
// on this machine (measureFloor).
func BenchmarkPerfStart(b *testing.B) {
	bin := buildStripped(b)
	llm := providertest.NewOpenAI(b)
	for _, fresh := range []bool{false, true} {
		name := "existing-db"
		if fresh {
			name = "fresh-db"
		}
		b.Run(name, func(b *testing.B) {
			dataDir := b.TempDir()
			var starts []time.Duration
			var faults []int64
			idle, idleAnon, idleFile, idleCPU := -1.0, 0.0, 0.0, 0.0
			for b.Loop() {
				b.StopTimer()
				if fresh {
					dataDir = b.TempDir()
				}
				tg := telegramtest.New(b, perfToken)
				cfg := perfConfig(b, dataDir, tg.URL, llm.BaseURL())
				b.StartTimer()
				g := startGateway(b, bin, cfg)
				polled := firstPoll(b, tg, g)
				b.StopTimer()
				starts = append(starts, polled.Sub(g.started))
				faults = append(faults, g.minorFaults(b))
				if idle < 0 {
					time.Sleep(time.Second)
					idle = g.rssMiB(b)
					idleAnon, idleFile = g.statusMiB(b, "RssAnon"), g.statusMiB(b, "RssFile")
					c0 := g.cpuTime(b)
					time.Sleep(2 * time.Second)
					idleCPU = ms(g.cpuTime(b)-c0) / 2
				}
				g.stop(b)
				tg.Close()
				b.StartTimer()
			}
			b.ReportMetric(ms(median(starts)), "start-ms")
			b.ReportMetric(ms(percentile(starts, 0)), "start-min-ms")
			b.ReportMetric(idle, "idle-MiB")
			b.ReportMetric(idleCPU, "idle-cpu-ms/s")
			b.ReportMetric(idleAnon, "idle-anon-MiB")
			b.ReportMetric(idleFile, "idle-file-MiB")
			slices.Sort(faults)
			b.ReportMetric(float64(faults[len(faults)/2]), "start-faults")
		})
	}
	b.Run("floor", func(b *testing.B) { measureFloor(b, buildReleaseOf(b, "./testdata/startfloor", "startfloor")) })
}

// measureFloor is BenchmarkPerfStart/floor: testdata/startfloor, the six
// libraries linked and nothing run, from exec to its first byte (main
// has begun), as a median over b.N starts, with its page faults then and
// its RSS, and its size. No start of the gateway can be faster on this
// machine; what the gateway's start takes beyond it is its own.
func measureFloor(b *testing.B, bin string) {
	var starts []time.Duration
	var faults []int64
	rss, anon, file := -1.0, 0.0, 0.0
	for b.Loop() {
		cmd := exec.Command(bin)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(stdout, make([]byte, 1)); err != nil {
			b.Fatalf("startfloor wrote nothing: %v", err)
		}
		starts = append(starts, time.Since(t0))
		b.StopTimer()
		p := &binaryProcess{cmd: cmd}
		faults = append(faults, p.minorFaults(b))
		if rss < 0 {
			rss, anon, file = p.rssMiB(b), p.statusMiB(b, "RssAnon"), p.statusMiB(b, "RssFile")
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatalf("startfloor: %v", err)
		}
		b.StartTimer()
	}
	fi, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(faults)
	b.ReportMetric(ms(median(starts)), "start-ms")
	b.ReportMetric(float64(faults[len(faults)/2]), "start-faults")
	b.ReportMetric(rss, "idle-MiB")
	b.ReportMetric(anon, "idle-anon-MiB")
	b.ReportMetric(file, "idle-file-MiB")
	b.ReportMetric(float64(fi.Size())/1e6, "binary-MB")
}

// perfRun is a running binary with its fakes, warmed up.
type perfRun struct {
	tg    *telegramtest.Server
	llm   *providertest.Server
	g     *binaryProcess
	users []*models.User
	// sent counts the replies so far.
	sent int

	mu    sync.Mutex
	llmAt map[string]time.Time // last user message -> arrival at the LLM
}

// startPerfRun builds and starts the binary against fresh fakes. The
// messages rotate over perfChats private chats so the channel's per-chat
// pacing (a burst of 3, then one message a second) never delays a reply.
// Warm-up: one message per chat opens its session and the HTTP
// connections.
func startPerfRun(b *testing.B) *perfRun {
	b.Helper()
	return startPerfRunOn(b, "")
}

// startPerfRunOn is startPerfRun with the state on the PostgreSQL
// database of dsn ("" = SQLite).
func startPerfRunOn(b *testing.B, dsn string) *perfRun {
	b.Helper()
	bin := buildStripped(b)
	r := &perfRun{llm: providertest.NewOpenAI(b), tg: telegramtest.New(b, perfToken), llmAt: map[string]time.Time{}}
	r.llm.SetReply(func(rec providertest.Received) providertest.Script {
		at := time.Now()
		r.mu.Lock()
		r.llmAt[rec.LastUser()] = at
		r.mu.Unlock()
		return providertest.Echo(rec)
	})
	r.g = startGateway(b, bin, perfConfigOn(b, b.TempDir(), r.tg.URL, r.llm.BaseURL(), dsn))
	b.Cleanup(func() { r.g.stop(b) })
	firstPoll(b, r.tg, r.g)
	r.users = make([]*models.User, perfChats)
	for i := range r.users {
		r.users[i] = telegramtest.User(int64(10000+i), "")
		r.tg.AddUpdate(r.tg.Private(r.users[i], fmt.Sprintf("warm-up %d", i)))
	}
	r.sent = len(r.users)
	r.tg.WaitSent(b, r.sent, time.Minute)
	return r
}

// sendGap spaces the messages of the per-message benchmarks: 25 a
// second, under Telegram's limit of about 30 a second across all chats
// (which the channel enforces), so no reply waits for that limit and the
// numbers show the gateway's own cost.
const sendGap = 40 * time.Millisecond

// space waits, outside the benchmark's timer, until sendGap has passed
// since the previous message.
func space(b *testing.B, last *time.Time) {
	if d := sendGap - time.Since(*last); d > 0 {
		b.StopTimer()
		time.Sleep(d)
		b.StartTimer()
	}
	*last = time.Now()
}

// send hands message n to the pending getUpdates and returns when.
func (r *perfRun) send(n int) (text string, at time.Time) {
	text = fmt.Sprintf("perf message %d", n)
	u := r.tg.Private(r.users[n%perfChats], text)
	at = time.Now()
	r.tg.AddUpdate(u)
	return text, at
}

// reply waits for the reply to text and returns when it was sent and
// when the LLM received the request.
func (r *perfRun) reply(b *testing.B, text string) (sentAt, llmAt time.Time) {
	b.Helper()
	r.sent++
	sent := r.tg.WaitSent(b, r.sent, 30*time.Second)
	last := sent[len(sent)-1]
	if last.Text != "echo: "+text {
		b.Fatalf("reply %q, want %q", last.Text, "echo: "+text)
	}
	r.mu.Lock()
	at, ok := r.llmAt[text]
	r.mu.Unlock()
	if !ok {
		b.Fatalf("the fake LLM never saw %q", text)
	}
	return last.At, at
}

// BenchmarkPerfMessage sends b.N private messages one at a time (each
// waits for its reply) through the running binary with an instant fake
// LLM, and reports:
//   - cpu-ms/msg: the gateway process's CPU time (see cpuTime) over all messages
//     (accept, durable queue commit, pipeline, LLM call, reply store and
//     send), divided by b.N;
//   - added-p50/p99-ms: from handing the update to the pending getUpdates
//     to the LLM request (fully read) at the fake LLM;
//   - reply-p50/p99-ms: from handing the update over to the sendMessage of
//     the reply arriving at the fake Bot API;
//   - busy-MiB: RSS after the run (busy-anon-MiB and busy-file-MiB: of
//     it anonymous, and pages of the binary).
func BenchmarkPerfMessage(b *testing.B) {
	measureMessages(b, startPerfRun(b))
}

// BenchmarkPerfEngines is BenchmarkPerfMessage on SQLite and on
// PostgreSQL in the same run, one replica: PostgreSQL is a local server
// (store/pgtest) with durable commits (fsync and synchronous_commit on),
// so added-p50/p99-ms show what the shared database adds before the LLM
// call.
//
//	go test -run '^$' -bench PerfEngines -benchtime 300x ./cmd/opentalon
func BenchmarkPerfEngines(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			dsn := ""
			if engine == "postgres" {
				dsn = pgtest.DurableDSN(b)
			}
			measureMessages(b, startPerfRunOn(b, dsn))
		})
	}
}

// measureMessages is BenchmarkPerfMessage's loop and report on r.
func measureMessages(b *testing.B, r *perfRun) {
	var added, reply []time.Duration
	n := 0
	cpu0 := r.g.cpuTime(b)
	faults0 := r.g.minorFaults(b)
	var last time.Time
	for b.Loop() {
		space(b, &last)
		text, t0 := r.send(n)
		n++
		sentAt, llmAt := r.reply(b, text)
		added = append(added, llmAt.Sub(t0))
		reply = append(reply, sentAt.Sub(t0))
	}
	cpu := r.g.cpuTime(b) - cpu0
	b.ReportMetric(ms(cpu)/float64(n), "cpu-ms/msg")
	b.ReportMetric(float64(r.g.minorFaults(b)-faults0)/float64(n), "faults/msg")
	b.ReportMetric(ms(percentile(added, 0.5)), "added-p50-ms")
	b.ReportMetric(ms(percentile(added, 0.99)), "added-p99-ms")
	b.ReportMetric(ms(percentile(reply, 0.5)), "reply-p50-ms")
	b.ReportMetric(ms(percentile(reply, 0.99)), "reply-p99-ms")
	b.ReportMetric(r.g.rssMiB(b), "busy-MiB")
	b.ReportMetric(r.g.statusMiB(b, "RssAnon"), "busy-anon-MiB")
	b.ReportMetric(r.g.statusMiB(b, "RssFile"), "busy-file-MiB")
}

// BenchmarkPerfBeforeLLM measures the gateway's CPU per message up to the
// LLM request only: the fake LLM holds each request, the process's CPU
// time (see cpuTime) is read when the request has arrived, and the deltas
// from handing the update over are summed over b.N messages
// (cpu-before-llm-ms/msg). Each message waits 10ms after its reply
// so the previous message's trailing work is not counted.
func BenchmarkPerfBeforeLLM(b *testing.B) {
	r := startPerfRun(b)
	ctx := context.Background()
	var cpu time.Duration
	n := 0
	var last time.Time
	for b.Loop() {
		space(b, &last)
		r.llm.Hold()
		before := r.g.cpuTime(b)
		text, _ := r.send(n)
		n++
		if err := r.llm.WaitInFlight(ctx, 1); err != nil {
			b.Fatal(err)
		}
		cpu += r.g.cpuTime(b) - before
		r.llm.Release()
		r.reply(b, text)
		// Let the work after the send (delivery record, queue row
		// done) finish outside the next message's window.
		b.StopTimer()
		time.Sleep(10 * time.Millisecond)
		b.StartTimer()
	}
	b.ReportMetric(ms(cpu)/float64(n), "cpu-before-llm-ms/msg")
}

// BenchmarkPerfMessageInProcess is BenchmarkPerfMessage with the App
// built inside the test process, so -cpuprofile and -memprofile show the
// gateway's own costs (next to the fakes'):
//
//	go test -run '^$' -bench PerfMessageInProcess -benchtime 2000x -cpuprofile cpu.out ./cmd/opentalon
//
// It reports the same added and reply latencies (no cpu-ms/msg: the
// process also runs the fakes).
func BenchmarkPerfMessageInProcess(b *testing.B) {
	llm := providertest.NewOpenAI(b)
	var llmMu sync.Mutex
	llmAt := map[string]time.Time{}
	llm.SetReply(func(r providertest.Received) providertest.Script {
		at := time.Now()
		llmMu.Lock()
		llmAt[r.LastUser()] = at
		llmMu.Unlock()
		return providertest.Echo(r)
	})
	tg := telegramtest.New(b, perfToken)
	cfgPath := perfConfig(b, b.TempDir(), tg.URL, llm.BaseURL())
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	cfg := parseConfig(b, string(raw))
	defer runBenchApp(b, cfg, AppOptions{})()

	users := make([]*models.User, perfChats)
	for i := range users {
		users[i] = telegramtest.User(int64(10000+i), "")
		tg.AddUpdate(tg.Private(users[i], fmt.Sprintf("warm-up %d", i)))
	}
	warm := len(users)
	tg.WaitSent(b, warm, time.Minute)

	var added, reply []time.Duration
	n := 0
	var last time.Time
	for b.Loop() {
		space(b, &last)
		text := fmt.Sprintf("perf message %d", n)
		u := tg.Private(users[n%perfChats], text)
		t0 := time.Now()
		tg.AddUpdate(u)
		n++
		sent := tg.WaitSent(b, warm+n, 30*time.Second)
		last := sent[len(sent)-1]
		if last.Text != "echo: "+text {
			b.Fatalf("reply %q, want %q", last.Text, "echo: "+text)
		}
		llmMu.Lock()
		at, ok := llmAt[text]
		llmMu.Unlock()
		if !ok {
			b.Fatalf("the fake LLM never saw %q", text)
		}
		added = append(added, at.Sub(t0))
		reply = append(reply, last.At.Sub(t0))
	}
	b.ReportMetric(ms(percentile(added, 0.5)), "added-p50-ms")
	b.ReportMetric(ms(percentile(added, 0.99)), "added-p99-ms")
	b.ReportMetric(ms(percentile(reply, 0.5)), "reply-p50-ms")
	b.ReportMetric(ms(percentile(reply, 0.99)), "reply-p99-ms")
}

// burstChats is the number of chats of one burst.
const burstChats = 50

// BenchmarkPerfBurst hands burstChats messages (one per chat) to a single
// getUpdates at once and waits for every reply: the time until all their
// LLM requests are out (burst-llm-ms: paced replies must not hold the
// queue workers), the time until the last reply is sent (burst-last-ms:
// Telegram's limit of about 30 messages a second across chats makes that
// more than a second) and the throughput (burst-msg/s).
func BenchmarkPerfBurst(b *testing.B) {
	r := startPerfRun(b)
	n := 0
	var total, llmOut time.Duration
	bursts := 0
	for b.Loop() {
		t0 := time.Now()
		texts := make([]string, 0, burstChats)
		for i := range burstChats {
			text := fmt.Sprintf("burst %d", n)
			texts = append(texts, text)
			r.tg.AddUpdate(r.tg.Private(r.users[i], text))
			n++
		}
		r.sent += burstChats
		sent := r.tg.WaitSent(b, r.sent, 5*time.Minute)
		total += sent[len(sent)-1].At.Sub(t0)
		var last time.Time
		r.mu.Lock()
		for _, text := range texts {
			if at := r.llmAt[text]; at.After(last) {
				last = at
			}
		}
		r.mu.Unlock()
		llmOut += last.Sub(t0)
		bursts++
		// Past the pacing windows before the next burst.
		b.StopTimer()
		time.Sleep(1200 * time.Millisecond)
		b.StartTimer()
	}
	b.ReportMetric(float64(n)/total.Seconds(), "burst-msg/s")
	b.ReportMetric(ms(llmOut)/float64(bursts), "burst-llm-ms")
	b.ReportMetric(ms(total)/float64(bursts), "burst-last-ms")
}

// runBenchApp builds the app of cfg and runs it in the background for a
// benchmark; the returned stop ends the run and closes the app.
func runBenchApp(b *testing.B, cfg *config.Config, o AppOptions) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := BuildApp(ctx, cfg, o)
	if err != nil {
		cancel()
		b.Fatalf("build app: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("app.Run: %v", err)
		}
		app.Close()
	}
}
