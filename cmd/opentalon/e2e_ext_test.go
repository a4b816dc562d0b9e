package main

// The extension points beyond tools through the whole App (issue 16),
// each with a real plugin process: testdata/extplugin, configured by the
// JSON file next to its binary.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/metrics/notify"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// builds holds the plugin binaries the package's tests run, each built
// once per test binary into one shared directory (TestMain removes it):
// tests copy a binary into their own plugin_dir, or run it where it is.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*built
}

type built struct {
	once sync.Once
	bin  string
	err  error
}

// sharedDir is the package's directory for what its tests share (plugin
// binaries, the migrated database), made on first use; it is enterable by
// every user, as a plugin_dir must be when the core runs as root and
// starts plugins as another (plugins.tools.run_as).
func sharedDir() (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "opentalon-test-")
		if err != nil {
			return "", err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
		builds.dir = d
	}
	return builds.dir, nil
}

func removeBuilt() {
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}

// pluginBinary returns the Go plugin package at dir (relative to this
// package), built once.
func pluginBinary(t testing.TB, dir string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.bins == nil {
		builds.bins = map[string]*built{}
	}
	b, ok := builds.bins[dir]
	if !ok {
		b = &built{}
		builds.bins[dir] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		var root string
		if root, b.err = sharedDir(); b.err != nil {
			return
		}
		b.bin = filepath.Join(root, filepath.Base(dir))
		cmd := exec.Command("go", "build", "-o", b.bin, ".")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", dir, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

func extBinary(t testing.TB) string {
	t.Helper()
	return pluginBinary(t, "testdata/extplugin")
}

// installExt puts a copy of the plugin named name, configured by conf,
// into dir (a plugin_dir).
func installExt(t testing.TB, dir, name string, conf map[string]any) {
	t.Helper()
	data, err := os.ReadFile(extBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	conf["name"] = name
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(path+".json", b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitPlugins waits until the app runs the named plugins.
func waitPlugins(t testing.TB, a *App, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		have := map[string]bool{}
		for _, c := range a.ext.Capabilities() {
			have[c.Name] = true
		}
		all := true
		for _, n := range names {
			all = all && have[n]
		}
		if all {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("plugins %v never registered", names)
}

func TestE2EPluginHooks(t *testing.T) {
	t.Parallel()
	pluginDir := plugintest.Dir(t)
	installExt(t, pluginDir, "review", map[string]any{"post_order": 20, "post_suffix": " — reviewed"})
	installExt(t, pluginDir, "stuck", map[string]any{"pre_order": 5, "pre_hang": true})
	scripts := t.TempDir()
	// Order 30: after the plugin's post hook (20).
	os.WriteFile(filepath.Join(scripts, "30_sign.lua"), []byte(`function post_hook(ctx) ctx.message = ctx.message .. " +lua30" return ctx end`), 0o600)
	// Order 10: before it.
	os.WriteFile(filepath.Join(scripts, "10_first.lua"), []byte(`function post_hook(ctx) ctx.message = ctx.message .. " +lua10" return ctx end`), 0o600)
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	cfg := twoModelConfig(t.TempDir(), llm.BaseURL(), fmt.Sprintf(`plugins:
  tools:
    plugin_dir: %s
    hooks: { timeout: 300ms }
  lua:
    scripts_dir: %s
`, pluginDir, scripts))
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	waitPlugins(t, h.app, "review", "stuck")

	t.Run("a hanging hook is skipped and the post hooks interleave by order", func(t *testing.T) {
		h.send("hello there")
		h.expect("answer from small +lua10 — reviewed +lua30")
		if r, _ := llm.Last(); r.LastUser() != "hello there" {
			t.Fatalf("the LLM saw %q; want the message as it was (the hanging hook skipped)", r.LastUser())
		}
	})
	t.Run("an escalated answer passes the hooks too", func(t *testing.T) {
		h.send("/retry")
		got := h.readUntil("answer from big")
		if !strings.HasSuffix(got, "answer from big +lua10 — reviewed +lua30") {
			t.Fatalf("/retry answered %q; want the escalated answer rewritten by the plugin's post hook", got)
		}
	})
}

// signed is the extplugin's signature of body under secret.
func signed(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestE2EPluginRouteInjectsIntoAConversation(t *testing.T) {
	t.Parallel()
	pluginDir := plugintest.Dir(t)
	installExt(t, pluginDir, "tracker", map[string]any{"routes": true, "secret": "whsec-1", "inject_channel": "telegram", "inject_chat": "-100555"})
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	const apiKey = "server-KEY-1"
	cfg := strings.Replace(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL), `listen: "127.0.0.1:0"`,
		`listen: "127.0.0.1:0"`+"\n  api_key: "+apiKey, 1) + "plugins:\n  tools:\n    plugin_dir: " + pluginDir + "\n"
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	addr := waitAddr(t, h.app)
	waitPlugins(t, h.app, "tracker")
	url := "http://" + addr + "/api/plugins/tracker/"

	body := `{"title":"Login page is down"}`
	code, resp := postJSON(t, url+"webhook", body, map[string]string{"X-Signature": signed("whsec-1", body), "X-Delivery": "d-42"})
	if code != http.StatusAccepted || resp != "queued" {
		t.Fatalf("public webhook = %d %q; want 202 queued", code, resp)
	}
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if s := sent[0]; s.ChatID != -100555 || !strings.Contains(s.Text, "echo: New issue: Login page is down") || s.ReplyTo != 0 {
		t.Fatalf("sent %+v; want the answer to the injected message in chat -100555, not quoting anything", s)
	}
	// The same delivery again is not answered twice.
	if code, _ := postJSON(t, url+"webhook", body, map[string]string{"X-Signature": signed("whsec-1", body), "X-Delivery": "d-42"}); code != http.StatusAccepted {
		t.Fatalf("redelivery = %d", code)
	}
	// A forged one is refused by the plugin.
	if code, _ := postJSON(t, url+"webhook", body, map[string]string{"X-Signature": signed("wrong", body)}); code != http.StatusUnauthorized {
		t.Fatalf("forged webhook = %d; want 401", code)
	}
	// A route that is not public needs the API key.
	for _, tt := range []struct {
		hdr  map[string]string
		want int
	}{{nil, http.StatusUnauthorized}, {map[string]string{"X-API-Key": "nope"}, http.StatusUnauthorized}, {map[string]string{"X-API-Key": apiKey}, http.StatusOK}} {
		req, _ := http.NewRequest("GET", url+"status", nil)
		for k, v := range tt.hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.want {
			t.Fatalf("GET status with %v = %d; want %d", tt.hdr, res.StatusCode, tt.want)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(bot.Sent()); n != 1 {
		t.Fatalf("%d messages sent; want the one answer (the redelivery dropped)", n)
	}
	if llm.Count() != 1 {
		t.Fatalf("LLM calls = %d; want 1", llm.Count())
	}
}

// Finding 9 of issue 25: every plugin was started with server.api_key,
// which opens every plugin's private routes, the status page and
// /metrics. Now each gets a key of its own: it opens the plugin LLM API
// and the plugin's own private routes, not another plugin's.
func TestE2EPluginsHaveKeysOfTheirOwn(t *testing.T) {
	pluginDir := plugintest.Dir(t)
	installExt(t, pluginDir, "alpha", map[string]any{"routes": true, "probe": true})
	installExt(t, pluginDir, "beta", map[string]any{"routes": true, "probe": true})
	llm := providertest.NewOpenAI(t)
	const apiKey = "server-KEY-9"
	h, generate := startWithPluginAPI(t, llm.BaseURL(), apiKey, "plugins:\n  tools:\n    plugin_dir: "+pluginDir+"\n")
	waitPlugins(t, h.app, "alpha", "beta")
	base := strings.TrimSuffix(generate, "llm/generate")
	get := func(url string) string {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	sum := sha256.Sum256([]byte(apiKey))
	server := hex.EncodeToString(sum[:])
	keys := map[string]string{}
	for _, tc := range []struct{ plugin, other string }{{"alpha", "beta"}, {"beta", "alpha"}} {
		got := get(base + tc.plugin + "/probe?other=" + tc.other)
		if !strings.HasPrefix(got, "own=200 other=401 llm=200 key=") {
			t.Fatalf("%s's probe = %q; want its own route and the LLM API open to its key, %s's route closed", tc.plugin, got, tc.other)
		}
		key := strings.TrimPrefix(got, "own=200 other=401 llm=200 key=")
		if key == server || key == keys[tc.other] {
			t.Fatalf("%s was started with server.api_key or another plugin's key", tc.plugin)
		}
		keys[tc.plugin] = key
	}
}

func TestE2EProviderPlugin(t *testing.T) {
	t.Parallel()
	pluginDir := plugintest.Dir(t)
	installExt(t, pluginDir, "myllm", map[string]any{})
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`state:
  data_dir: %q
models:
  providers:
    fake:
      api: openai-completions
      base_url: %q
      api_key: test-key
    mine:
      api: plugin
      plugin: myllm
      api_key: plugin-key
  catalog:
    mine/m1: { alias: m1, weight: 90, cost: { input: 1, output: 1 } }
    fake/small: { alias: small, weight: 50 }
routing:
  primary: mine/m1
  fallbacks: [fake/small]
server:
  listen: ""
plugins:
  tools:
    plugin_dir: %s
`, dir, llm.BaseURL(), pluginDir)
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	waitPlugins(t, h.app, "myllm")

	h.send("hello there")
	h.expect("plugin-llm m1: hello there")
	if llm.Count() != 0 {
		t.Fatalf("the fallback was called %d times; want the plugin to answer", llm.Count())
	}
	// Its 429 cools its credential and fails over to the next model, as
	// a built-in provider's does.
	h.send("give me a 429")
	h.expect("echo: give me a 429")
	h.send("and now?")
	h.expect("echo: and now?") // the plugin's credential is still cooling
	ps := h.app.router.Profiles("mine")
	if len(ps) != 1 || ps[0].Profile.ID != "mine:default" || !ps[0].CooldownUntil.After(time.Now().Add(60*time.Second)) || ps[0].LastError != "rate_limited" {
		t.Fatalf("profiles of mine = %+v; want mine:default cooling for the plugin's retry-after (90s)", ps)
	}
	// The ledger counts the plugin's usage like any model's.
	rows, err := h.app.db.UsageTotals(context.Background(), time.Now().Add(-time.Hour), "model", "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		found = found || (r.Key == "mine/m1" && r.InputTokens == 11 && r.OutputTokens == 5 && r.CostUSD > 0)
	}
	if !found {
		t.Fatalf("usage by model = %+v; want mine/m1 with the plugin's tokens and cost", rows)
	}
}

func TestE2EAuthProvider(t *testing.T) {
	t.Parallel()
	pluginDir := plugintest.Dir(t)
	installExt(t, pluginDir, "directory", map[string]any{"auth": map[string]string{"42": "allow", "7": "admin", "13": "fail"}})
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	cfg := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL) + fmt.Sprintf(`plugins:
  tools:
    plugin_dir: %s
  auth:
    plugin: directory
`, pluginDir)
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	waitPlugins(t, h.app, "directory")

	bot.AddUpdate(bot.Private(telegramtest.User(99, "mallory"), "let me in")) // denied
	bot.AddUpdate(bot.Private(telegramtest.User(13, "flaky"), "hello?"))      // the provider fails: refused
	bot.AddUpdate(bot.Private(telegramtest.User(42, "alice"), "hello from alice"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if sent[0].ChatID != 42 || !strings.Contains(sent[0].Text, "echo: hello from alice") {
		t.Fatalf("sent %+v; want only alice answered", sent[0])
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(bot.Sent()); n != 1 || llm.Count() != 1 {
		t.Fatalf("%d messages sent, %d LLM calls; want the denied and the failed user ignored", n, llm.Count())
	}
	// The provider's admin may use admin-only commands.
	bot.AddUpdate(bot.Private(telegramtest.User(7, "root"), "/pair"))
	sent = bot.WaitSent(t, 2, 20*time.Second)
	if strings.Contains(sent[1].Text, "Only an admin") {
		t.Fatalf("the auth provider's admin got %q", sent[1].Text)
	}
}

func TestE2EScheduleFiresAtTheClocksTime(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 5, 1, 8, 59, 30, 0, time.UTC)) // a Friday
	cfg := telegramConfig(dir, llm.BaseURL(), bot.URL) + `timezone: UTC
schedules:
  - cron: "0 9 * * 1-5"
    prompt: "Summarize yesterday's open incidents in three bullet points."
    channel: telegram
    chat: "-100777"
    missed: once
`
	start := func() *harness {
		return startAppWith(t, loadConfigFile(t, writeConfig(t, cfg)), AppOptions{Now: clk.Now})
	}
	h := start()
	waitAddr(t, h.app)
	// The clock moves only once the scheduler has read it: its next
	// firing is stored as 09:00 today. (Moved before that on a loaded
	// machine, the first firing was computed from 09:00:00: Monday's.)
	nineToday := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s, err := h.app.db.Schedules(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(s) == 1 && s[0].NextFire.Equal(nineToday) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedules %+v; want the next firing at %v", s, nineToday)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the scheduler's ticks at 08:59:30
	if n := len(bot.Sent()); n != 0 {
		t.Fatalf("%d messages before 09:00", n)
	}
	clk.Advance(30 * time.Second) // 09:00:00
	sent := bot.WaitSent(t, 1, 20*time.Second)
	if s := sent[0]; s.ChatID != -100777 || s.Text != "echo: Summarize yesterday's open incidents in three bullet points." || s.ReplyTo != 0 {
		t.Fatalf("sent %+v; want the answer to the prompt in chat -100777", s)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(bot.Sent()); n != 1 {
		t.Fatalf("%d messages; want the firing answered once", n)
	}
	h.shutdown()

	// Down across Monday's firing (09:00); back at 11:00: missed: once
	// runs it once.
	clk.Advance(3*24*time.Hour + 2*time.Hour)
	h2 := start()
	waitAddr(t, h2.app)
	sent = bot.WaitSent(t, 2, 20*time.Second)
	if s := sent[1]; s.ChatID != -100777 || !strings.Contains(s.Text, "Summarize yesterday's open incidents") {
		t.Fatalf("after the restart sent %+v; want the missed firing", s)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(bot.Sent()); n != 2 {
		t.Fatalf("%d messages; want the missed firing once", n)
	}
	if n := llm.Count(); n != 2 {
		t.Fatalf("LLM calls = %d; want 2", n)
	}
}

func TestE2EScheduleCommand(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	h := startApp(t, loadConfigFile(t, writeConfig(t, testConfig(t.TempDir(), llm.BaseURL(), ""))))
	h.send("/schedule every fortnight say hi")
	got := h.readUntil("/schedule every weekday at 9:00 summarize yesterday's open incidents")
	if !strings.HasPrefix(got, `I could not read that schedule: "fortnight" after every is not something I can count`) || !strings.Contains(got, "Usage: /schedule <when> <what>") {
		t.Fatalf("bad spec answered %q; want the reason and the usage", got)
	}
	h.send("/schedule every weekday at 9:00 summarize the incidents")
	if got := h.next(); !strings.HasPrefix(got, "Scheduled #1: every weekday at 09:00 — next ") {
		t.Fatalf("/schedule = %q", got)
	}
	h.send("/schedules")
	got = h.readUntil("summarize the incidents")
	if !strings.Contains(got, "#1 every weekday at 09:00") {
		t.Fatalf("/schedules = %q", got)
	}
	h.send("/unschedule 1")
	if got := h.next(); got != "Removed #1 (every weekday at 09:00)." {
		t.Fatalf("/unschedule = %q", got)
	}
	if llm.Count() != 0 {
		t.Fatalf("schedule commands reached the LLM %d times", llm.Count())
	}
}

// TestE2EChannelOutageWebhook runs the real binary with Telegram pointed
// at a platform that is down: the webhook sink gets one signed
// channel_down, and no more within the window.
func TestE2EChannelOutageWebhook(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	bot.Stop() // the platform is down from the start
	const secret = "whsec-ops"
	type delivery struct {
		p     notify.Payload
		sigOK bool
	}
	got := make(chan delivery, 10)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p notify.Payload
		json.Unmarshal(body, &p)
		got <- delivery{p, r.Header.Get(notify.SignatureHeader) == notify.Sign([]byte(secret), body)}
	}))
	defer sink.Close()
	cfg := strings.Replace(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL), `listen: "127.0.0.1:0"`, `listen: ""`, 1) + fmt.Sprintf(`notifications:
  channel_down_after: 1s
  sinks:
    - type: webhook
      url: %s
      secret: %s
      events: [channel_down]
`, sink.URL, secret)
	p := startBinary(t, nil, "--config", writeConfig(t, cfg), "run")
	var d delivery
	select {
	case d = <-got:
	case <-time.After(30 * time.Second):
		t.Fatalf("no webhook for the outage; stderr: %s", p.stderr.String())
	}
	if d.p.Kind != core.EventChannelDown || d.p.Subject != "telegram" || !d.sigOK || !strings.Contains(d.p.Message, "channel telegram has been down") {
		t.Fatalf("webhook %+v (signature ok: %v)", d.p, d.sigOK)
	}
	select {
	case d := <-got:
		t.Fatalf("a second webhook within the window: %+v", d.p)
	case <-time.After(3 * time.Second):
	}
	if strings.Contains(p.stderr.String(), secret) {
		t.Fatal("the webhook secret is in the log")
	}
}
