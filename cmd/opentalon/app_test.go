package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

// The test binary links oneproc too: its tests, many at once, get the
// runtime's default GOMAXPROCS back (before testing reads it for
// -test.parallel and -test.cpu), as they had before oneproc.
func init() {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.SetDefaultGOMAXPROCS()
	}
}

// TestMain lets the test binary play the opentalon binary for the crash
// test (re-executed with OPENTALON_TEST_MAIN=1) and for the helpers the
// gateway re-executes itself as.
func TestMain(m *testing.M) {
	// Re-executed as a confined helper (the PDF reader).
	if code, ok := helperMain(os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}); ok {
		os.Exit(code)
	}
	if os.Getenv("OPENTALON_TEST_MAIN") == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.LookupEnv))
	}
	// The tests here wait on fake platforms, child processes and timers
	// far more than on the CPU: run more of them at once than -parallel's
	// default (GOMAXPROCS), unless -parallel was given.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	removeBuilt()
	os.Exit(code)
}

// testConfig is a config for a fake OpenAI-compatible server.
func testConfig(dataDir, baseURL, extra string) string {
	return fmt.Sprintf(`state:
  data_dir: %q
models:
  providers:
    fake:
      api: openai-completions
      base_url: %q
      api_key: test-key
  catalog:
    fake/small: { alias: small, weight: 80, context_window: 8000 }
routing:
  primary: fake/small
server:
  listen: ""
%s`, dataDir, baseURL, extra)
}

func parseConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(withTestStore(t, yaml)), t.TempDir(), config.MapEnv(nil))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// harness runs an App in-process with the console on pipes.
type harness struct {
	t     testing.TB
	app   *App
	in    *io.PipeWriter
	lines chan string
	done  chan error
	stop  context.CancelFunc
}

func startApp(t testing.TB, cfg *config.Config) *harness {
	t.Helper()
	return startAppWith(t, cfg, AppOptions{})
}

// startAppWith is startApp with options (the console pipes are set here).
func startAppWith(t testing.TB, cfg *config.Config, o AppOptions) *harness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	o.Stdin, o.Stdout = inR, outW
	if o.Logger == nil {
		// The app's log is shown when the test fails.
		logs := &lockedBuf{}
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the app's log:\n%s", logs.String())
			}
		})
	}
	seedDB(t, cfg.State.DataDir)
	app, err := BuildApp(ctx, cfg, o)
	if err != nil {
		cancel()
		t.Fatalf("build app: %v", err)
	}
	h := &harness{t: t, app: app, in: inW, lines: make(chan string, 1000), done: make(chan error, 1), stop: cancel}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	go func() {
		err := app.Run(ctx)
		app.Close()
		outW.Close()
		// A send after the app ended fails instead of waiting for ever.
		inR.CloseWithError(fmt.Errorf("the app ended (run: %v)", err))
		h.done <- err
	}()
	t.Cleanup(h.shutdown)
	return h
}

func (h *harness) send(text string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, text+"\n"); err != nil {
		h.t.Fatalf("write to console: %v", err)
	}
}

// expect reads the next output line and checks it.
func (h *harness) expect(want string) {
	h.t.Helper()
	select {
	case got, ok := <-h.lines:
		if !ok {
			h.t.Fatalf("console closed; want %q", want)
		}
		if got != want {
			h.t.Fatalf("console line = %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		h.t.Fatalf("no console line; want %q", want)
	}
}

// next returns the next output line.
func (h *harness) next() string {
	h.t.Helper()
	return h.nextWithin(20 * time.Second)
}

// nextWithin returns the next output line, waiting up to d for it.
func (h *harness) nextWithin(d time.Duration) string {
	h.t.Helper()
	select {
	case got := <-h.lines:
		return got
	case <-time.After(d):
		h.t.Fatalf("no console line within %s", d)
	}
	return ""
}

// shutdown stops the app gracefully and waits for it.
func (h *harness) shutdown() {
	if h.stop == nil {
		return
	}
	h.stop()
	h.in.Close()
	if err := <-h.done; err != nil {
		h.t.Errorf("app run: %v", err)
	}
	h.stop = nil
}

func TestConsoleEndToEnd(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dir := t.TempDir()
	cfg := parseConfig(t, testConfig(dir, fake.BaseURL(), ""))

	h := startApp(t, cfg)
	h.send("what is the capital of France?")
	h.expect("echo: what is the capital of France?")
	r, _ := fake.Last()
	if r.APIKey != "test-key" || !strings.Contains(r.System, "[plugin_output]") {
		t.Fatalf("LLM saw key %q and system prompt %q; want the configured key and the safety rules", r.APIKey, r.System)
	}
	h.send("and of Spain?")
	h.expect("echo: and of Spain?")
	if r, _ := fake.Last(); len(r.Messages) != 3 || r.Messages[0].Content != "what is the capital of France?" || r.Messages[1].Content != "echo: what is the capital of France?" {
		t.Fatalf("second request history = %+v; want the first turn then the question", r.Messages)
	}

	h.send("/new")
	h.expect("Started a fresh conversation: earlier messages are no longer part of the context.")
	h.send("fresh start")
	h.expect("echo: fresh start")
	if r, _ := fake.Last(); len(r.Messages) != 1 {
		t.Fatalf("after /new the LLM saw %d messages: %+v; want only the new question", len(r.Messages), r.Messages)
	}
	h.shutdown()

	// A full restart on the same database keeps the conversation.
	h2 := startApp(t, parseConfig(t, testConfig(dir, fake.BaseURL(), "")))
	h2.send("do you remember?")
	h2.expect("echo: do you remember?")
	r, _ = fake.Last()
	if len(r.Messages) != 3 || r.Messages[0].Content != "fresh start" {
		t.Fatalf("after restart the LLM saw %+v; want the earlier turn", r.Messages)
	}
	h2.send("/status")
	if got := h2.next(); !strings.HasPrefix(got, "Model: fake/small") {
		t.Fatalf("/status first line = %q", got)
	}
}

func TestDuplicateMessageProcessedOnce(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	h := startApp(t, parseConfig(t, testConfig(t.TempDir(), fake.BaseURL(), "")))
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "console", Chat: "local"}, MessageID: "dup-1", UserID: "u", Text: "once please"}
	// Accept may run before the gateway's loop starts accepting.
	waitAccepting(t, h.app.gateway)
	for range 3 {
		if err := h.app.gateway.Accept(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	h.expect("echo: once please")
	h.send("marker")
	h.expect("echo: marker")
	if n := fake.Count(); n != 2 {
		t.Fatalf("LLM called %d times; want 2 (the duplicate processed once, then the marker)", n)
	}
}

// waitAccepting waits until the gateway accepts events: it submits a
// neutral reaction, which produces no output.
func waitAccepting(t testing.TB, g *gateway.Gateway) {
	t.Helper()
	probe := core.Reaction{Conversation: core.ConversationKey{Channel: "console", Chat: "probe"}, EventID: "probe", MessageID: "none", Emoji: "👀"}
	for i := 0; ; i++ {
		err := g.React(context.Background(), probe)
		if err == nil {
			return
		}
		if i > 2000 {
			t.Fatalf("gateway never accepted: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConversationsRunConcurrentlyAndInOrder(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	fake.SetReply(func(r providertest.Received) providertest.Script {
		if strings.HasPrefix(r.LastUser(), "slow") {
			<-gate
		}
		return providertest.Echo(r)
	})
	// The fake is on loopback, which makes a provider local (its calls one
	// at a time under llm.max_concurrent_local, default 1) unless it says
	// local: false, as this one does.
	cfg := strings.Replace(testConfig(t.TempDir(), fake.BaseURL(), ""), "api_key: test-key", "api_key: test-key\n      local: false", 1)
	h := startApp(t, parseConfig(t, cfg))
	waitAccepting(t, h.app.gateway)

	// Conversation A is stuck in a slow LLM call; B must still be answered.
	h.send("slow one")
	if err := fake.WaitRequests(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.send("slow two") // same conversation: must wait for "slow one"
	other := core.Inbound{Conversation: core.ConversationKey{Channel: "console", Chat: "other"}, MessageID: "b1", UserID: "u", Text: "quick"}
	if err := h.app.gateway.Accept(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	h.expect("echo: quick")
	open()
	h.expect("echo: slow one")
	h.expect("echo: slow two")
	// The second message of A reached the LLM only after the first was
	// answered: its history holds the first answer.
	var second providertest.Received
	for _, r := range fake.Requests() {
		if r.LastUser() == "slow two" {
			second = r
		}
	}
	if len(second.Messages) != 3 || second.Messages[1].Content != "echo: slow one" {
		t.Fatalf("second message of the conversation saw %+v; want the first answer in its history", second.Messages)
	}
}

func TestMalformedLLMAnswerIsReported(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	// Garbled, and garbled again when asked once more.
	fake.Enqueue(providertest.Script{Body: "this is not json"})
	fake.Enqueue(providertest.Script{Body: "this is not json either"})
	dir := t.TempDir()
	h := startApp(t, parseConfig(t, testConfig(dir, fake.BaseURL(), "")))
	h.send("hello?")
	if got := h.next(); !strings.HasPrefix(got, "Sorry, I could not answer that: the AI provider sent an answer I could not read") {
		t.Fatalf("reply = %q; want the apology for a malformed answer", got)
	}
	h.send("again")
	h.expect("echo: again")
	counts, err := h.app.db.QueueCounts(context.Background())
	if err != nil || counts[core.StatusFailed] != 1 {
		t.Fatalf("queue counts = %v (%v); want one failed request", counts, err)
	}
}

func TestHealthAndReady(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	cfg := parseConfig(t, strings.Replace(testConfig(t.TempDir(), fake.BaseURL(), ""), `listen: ""`, `listen: "127.0.0.1:0"`, 1))
	h := startApp(t, cfg)
	var addr string
	select {
	case addr = <-h.app.addr:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not listen")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := httpGet(t, "http://"+addr+path)
		if code != 200 {
			t.Fatalf("GET %s = %d %q", path, code, body)
		}
	}
}

// TestCrashRestartAnswersOnce kills the gateway process while the LLM
// holds the request; after a restart the message is answered exactly once.
func TestCrashRestartAnswersOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	fake := providertest.NewOpenAI(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(testConfig(dir, fake.BaseURL(), "")), 0o600); err != nil {
		t.Fatal(err)
	}
	fake.Hold()
	first := startProcess(t, cfgPath)
	first.send("survive the crash")
	if err := fake.WaitRequests(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	first.kill()
	fake.Release()

	second := startProcess(t, cfgPath)
	second.waitLine("echo: survive the crash")
	second.closeInput()
	out := second.wait()
	if n := strings.Count(out+first.output(), "echo: survive the crash"); n != 1 {
		t.Fatalf("answer appeared %d times; want exactly once\nfirst run: %q\nsecond run: %q", n, first.output(), out)
	}
	if n := fake.Count(); n != 2 {
		t.Fatalf("LLM requests = %d; want 2 (the interrupted one and the answered one)", n)
	}
}

func TestBuildFailureIsAClearError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := filepath.Join(dir, "profiles.json")
	if err := os.WriteFile(pf, []byte(`{"fake":[{"id":"fake:a","type":"api_key","key":"k"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, testConfig(dir, "http://127.0.0.1:1/v1", "auth:\n  profiles_file: "+pf+"\n"))
	_, err := BuildApp(context.Background(), cfg, AppOptions{Stdin: strings.NewReader(""), Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("BuildApp with a group-readable profiles file: %v; want the chmod fix", err)
	}
}

// deliveredReply waits for the reply whose message the platform knows as
// platformID to be in the delivery log: the fake platform sees a message
// a moment before the gateway records that it was sent.
func deliveredReply(t testing.TB, h *harness, channel, platformID string) *core.Reply {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := h.app.db.ReplyByPlatformID(context.Background(), channel, platformID)
		if err != nil {
			t.Fatalf("reply for %s message %s: %v", channel, platformID, err)
		}
		if r != nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply for %s message %s in the delivery log", channel, platformID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// migrated is a database with every migration applied, made once per
// test binary: an app a test starts gets a copy of it in its data dir
// instead of migrating a fresh one, which under -race costs about half a
// second of CPU per app (the store's own tests migrate from scratch).
var migrated struct {
	once sync.Once
	path string
	err  error
}

// seedDB copies the migrated database into dataDir unless a database is
// there already.
func seedDB(t testing.TB, dataDir string) {
	t.Helper()
	dst := filepath.Join(dataDir, store.FileName)
	if _, err := os.Stat(dst); err == nil {
		return
	}
	migrated.once.Do(func() {
		var dir string
		if dir, migrated.err = sharedDir(); migrated.err != nil {
			return
		}
		dir = filepath.Join(dir, "db")
		db, err := store.Open(context.Background(), dir, store.Options{})
		if err != nil {
			migrated.err = err
			return
		}
		if migrated.err = db.Close(); migrated.err != nil {
			return
		}
		migrated.path = filepath.Join(dir, store.FileName)
		if _, err := os.Stat(migrated.path + "-wal"); err == nil {
			migrated.err = fmt.Errorf("the migrated database kept its WAL after Close; copying the file alone would lose it")
		}
	})
	if migrated.err != nil {
		t.Fatalf("migrated database: %v", migrated.err)
	}
	data, err := os.ReadFile(migrated.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStartSaysWhichProvidersCountAsLocal: a provider on a loopback or
// private address counts as local unless its config says, and its calls
// then go one at a time (llm.max_concurrent_local): a proxy on this
// machine in front of a cloud API was throttled without a word. The start
// says so once, with the key that changes it; not for a provider whose
// config says local: false.
func TestStartSaysWhichProvidersCountAsLocal(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	for _, tc := range []struct {
		name, extra string
		told        bool
	}{{"by address", "", true}, {"said", "      local: false\n", false}} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(testConfig(t.TempDir(), llm.BaseURL(), ""), "      api_key: test-key\n", "      api_key: test-key\n"+tc.extra, 1)
			logs := &lockedBuf{}
			h := startAppWith(t, parseConfig(t, y), AppOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			h.send("hello")
			h.expect("echo: hello")
			told := func() bool {
				return strings.Contains(logs.String(), "provider counts as local by its address: its calls go 1 at a time (llm.max_concurrent_local); set models.providers.fake.local: false")
			}
			// The line follows "opentalon running", which may come just
			// after the first answer.
			for deadline := time.Now().Add(5 * time.Second); !told() && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if !tc.told && strings.Contains(logs.String(), "opentalon running") {
					break
				}
			}
			if told() != tc.told {
				t.Fatalf("told %v; want %v; the log:\n%s", told(), tc.told, logs.String())
			}
		})
	}
}
