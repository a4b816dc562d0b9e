package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/metrics/status"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// seedScripts copies seed 001's scripts (saved unchanged under
// lua/testdata/seed) into a fresh scripts directory.
func seedScripts(t testing.TB, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("..", "..", "lua", "testdata", "seed", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func luaConfig(dataDir, baseURL, scriptsDir, extra string) string {
	return testConfig(dataDir, baseURL, fmt.Sprintf(`plugins:
  lua:
    scripts_dir: %q
    default_model: small
%s`, scriptsDir, extra))
}

// Seed 001's scripts in the running gateway: a filter drops, a pre-hook
// classifies (the metadata is stored with the reply), a post-hook
// rewrites the answer the user receives.
func TestLuaHooksInTheGateway(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	scripts := seedScripts(t, "filter.lua", "expert_classify.lua", "vocabulary_guard.lua")
	cfg := parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), scripts, ""))
	h := startApp(t, cfg)

	h.send("urgent: a bug in login")
	h.expect("echo: urgent: a defect in login")
	if r, _ := fake.Last(); r.LastUser() != "urgent: a bug in login" {
		t.Fatalf("the LLM saw %q; the post-hook must not touch the question", r.LastUser())
	}
	h.send("cheap spam here")
	h.send("thanks guys")
	h.expect("echo: thanks team") // nothing was sent for the spam
	if fake.Count() != 2 {
		t.Fatalf("the LLM got %d requests; a dropped message must not reach it", fake.Count())
	}

	ctx := context.Background()
	sess, err := h.app.db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "local"})
	if err != nil {
		t.Fatal(err)
	}
	dropped := ""
	for id := int64(1); id <= 3; id++ {
		if st, _, lastErr, _ := h.app.db.QueueStatus(ctx, id); strings.Contains(lastErr, "dropped") {
			dropped = st + ": " + lastErr
		}
	}
	if dropped != "done: dropped by a pre-hook: blocked word: spam" {
		t.Fatalf("the dropped request was recorded as %q", dropped)
	}
	// The first request's reply carries the classifier's metadata.
	for id := int64(1); id <= 3; id++ {
		r, err := h.app.db.ReplyForRequest(ctx, id, sess.Conversation)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil && strings.Contains(r.Text, "defect in login") {
			if r.Metadata["category"] != "jira" || r.Metadata["priority"] != "critical" {
				t.Fatalf("stored metadata = %v, want category=jira priority=critical", r.Metadata)
			}
			return
		}
	}
	t.Fatal("no stored reply for the first message")
}

// plugins.lua.drop_notice answers a dropped message without the LLM.
func TestLuaDropNotice(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	scripts := seedScripts(t, "filter.lua")
	cfg := parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), scripts, `    drop_notice: "Sorry, that message was blocked."`))
	h := startApp(t, cfg)
	h.send("a scam offer")
	h.expect("Sorry, that message was blocked.")
	if fake.Count() != 0 {
		t.Fatalf("the LLM got %d requests for a dropped message", fake.Count())
	}
}

// ctx.llm goes through the router to the configured provider (purpose
// "lua" in the ledger); the main LLM sees the translated message.
func TestLuaLLMThroughTheRouter(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	fake.SetReply(func(r providertest.Received) providertest.Script {
		q := r.LastUser()
		switch {
		case strings.HasPrefix(q, "What language is this text?"):
			return providertest.Script{Text: "de"}
		case strings.HasPrefix(q, "Translate to English: "):
			return providertest.Script{Text: "Good morning"}
		}
		return providertest.Echo(r)
	})
	scripts := seedScripts(t, "smart_preprocess.lua")
	h := startApp(t, parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), scripts, "")))
	h.send("Guten Morgen")
	h.expect("echo: Good morning")
	reqs := fake.Requests()
	if len(reqs) != 3 || reqs[0].Model != "small" || !strings.Contains(reqs[0].LastUser(), "Guten Morgen") {
		t.Fatalf("requests = %d (%+v); want the language check, the translation and the answer", len(reqs), reqs)
	}
	totals, err := h.app.db.UsageTotals(context.Background(), time.Now().Add(-time.Hour), "purpose", "")
	if err != nil {
		t.Fatal(err)
	}
	var luaCalls int
	for _, u := range totals {
		if u.Key == "lua" {
			luaCalls = u.Calls
		}
	}
	if luaCalls != 2 {
		t.Fatalf("usage by purpose = %+v, want 2 calls of purpose lua", totals)
	}
}

// tagAfter tags every answer and records the metadata its hooks saw.
type tagAfter struct {
	mu   sync.Mutex
	meta []map[string]string
}

func (h *tagAfter) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	return core.PreResult{Text: in.Text, Metadata: in.Metadata}, nil
}

func (h *tagAfter) Post(_ context.Context, in core.HookInput, answer string) (string, error) {
	h.mu.Lock()
	h.meta = append(h.meta, in.Metadata)
	h.mu.Unlock()
	return answer + " [tagged]", nil
}

// AppOptions.Hooks still run, after the Lua hooks.
func TestLuaHooksChainWithAppHooks(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	scripts := seedScripts(t, "expert_classify.lua", "vocabulary_guard.lua")
	tag := &tagAfter{}
	h := startAppWith(t, parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), scripts, "")), AppOptions{Hooks: tag})
	h.send("deploy to prod asap")
	h.expect("echo: deploy to prod with high priority [tagged]")
	tag.mu.Lock()
	defer tag.mu.Unlock()
	if len(tag.meta) != 1 || tag.meta[0]["category"] != "devops" {
		t.Fatalf("the app hook saw metadata %v; want the Lua classifier's", tag.meta)
	}
}

// A script stuck in a loop holds one worker until its timeout; the
// gateway answers other conversations meanwhile. The loop's timeout
// outlasts the test, so "meanwhile" is what the queue shows (the looping
// message still running when the other answers came), not a race against
// the timeout (2 s once passed on a loaded machine before the other
// answers); the shutdown cuts the loop short. That a script past its
// timeout is stopped (lua's TestTimeoutStopsALoop) and a failed hook skipped
// (core/gateway's TestOrderedHooksSkipFailuresAndStopOnDrop) is tested
// where it is done.
func TestGatewayAnswersWhileAScriptLoops(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stuck.lua"), []byte(`function pre_hook(ctx)
  if ctx.message == "loop" then while true do end end
  ctx.message = ctx.message .. "!"
  return ctx
end`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), dir, "    limits: { timeout_seconds: 60 }"))
	cfg.Queue.ShutdownGrace = config.Duration(time.Second)
	h := startApp(t, cfg)
	waitAccepting(t, h.app.gateway)
	loop := core.Inbound{Conversation: core.ConversationKey{Channel: "console", Chat: "other"}, MessageID: "loop-1", UserID: "u", Text: "loop"}
	if err := h.app.gateway.Accept(context.Background(), loop); err != nil {
		t.Fatal(err)
	}
	looping := func() bool {
		t.Helper()
		for id := int64(1); id <= 20; id++ {
			st, _, _, err := h.app.db.QueueStatus(context.Background(), id)
			if err != nil || st != core.StatusRunning {
				continue
			}
			if it, _, err := h.app.db.QueueItem(context.Background(), id); err == nil && it.Message != nil && it.Message.MessageID == "loop-1" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(20 * time.Second); !looping(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the looping message never ran")
		}
	}
	h.send("hello")
	h.expect("echo: hello!")
	h.send("still there?")
	h.expect("echo: still there?!")
	if !looping() {
		t.Fatal("the looping message stopped running before the other answers came; want them while it loops")
	}
	h.shutdown()
}

// With plugins.lua.watch a changed script answers the next message, and
// a broken edit keeps the previous version.
func TestLuaReloadInTheGateway(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "sign.lua")
	write := func(src string) {
		if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`function post_hook(ctx) ctx.message = ctx.message .. " -- v1" return ctx end`)
	h := startApp(t, parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), dir, "    watch: true")))
	h.send("a")
	h.expect("echo: a -- v1")
	write(`function post_hook(ctx) ctx.message = ctx.message .. " -- v2" return ctx end`)
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		q := fmt.Sprint("b", i)
		h.send(q)
		if got := h.next(); got == "echo: "+q+" -- v2" {
			break
		} else if got != "echo: "+q+" -- v1" || time.Now().After(deadline) {
			t.Fatalf("after the change: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	running := h.app.statusScripts()
	if len(running) != 1 || !running[0].Loaded || running[0].Version == "" || running[0].ReloadError != "" {
		t.Fatalf("status before the broken edit: %+v", running)
	}
	write("function post_hook(ctx)\n  ctx.message = ctx.message ..\nend\n")
	// The status page says the edit did not load, where it broke, and
	// that the previous version keeps running.
	scriptStatus := func(what string, ok func(status.Script) bool) status.Script {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			sc := h.app.statusScripts()
			if len(sc) == 1 && ok(sc[0]) {
				return sc[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("status never showed %s: %+v", what, sc)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	broken := scriptStatus("the broken edit", func(s status.Script) bool { return s.ReloadError != "" })
	if !broken.Loaded || broken.Version != running[0].Version || !strings.Contains(broken.ReloadError, "sign.lua:3:") {
		t.Fatalf("status after the broken edit: %+v; want version %s running and the error at sign.lua:3", broken, running[0].Version)
	}
	h.send("c")
	h.expect("echo: c -- v2")
	write(`function post_hook(ctx) ctx.message = ctx.message .. " -- v3" return ctx end`)
	fixed := scriptStatus("the fix", func(s status.Script) bool { return s.ReloadError == "" })
	if !fixed.Loaded || fixed.Version == running[0].Version {
		t.Fatalf("status after the fix: %+v", fixed)
	}
	h.send("d")
	h.expect("echo: d -- v3")
}

// Seed 001's config names "./scripts" (and "./plugins"): in a fresh
// directory run creates them, and a script dropped in afterwards works
// without a restart.
func TestLuaScriptsDirMissingAtStartIsCreated(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dir := filepath.Join(t.TempDir(), "scripts")
	plugins := filepath.Join(t.TempDir(), "plugins")
	h := startApp(t, parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), dir, "    watch: true\n  tools: { plugin_dir: "+plugins+" }")))
	h.send("a")
	h.expect("echo: a")
	for _, d := range []string{dir, plugins} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
			t.Fatalf("%s after start: %v %v; want a directory only its owner writes", d, fi, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sign.lua"), []byte(`function post_hook(ctx) ctx.message = ctx.message .. " -- signed" return ctx end`), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		q := fmt.Sprint("b", i)
		h.send(q)
		if got := h.next(); got == "echo: "+q+" -- signed" {
			break
		} else if got != "echo: "+q || time.Now().After(deadline) {
			t.Fatalf("after the script was dropped in: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A script whose run eats memory is stopped by the heap watchdog; the
// gateway answers other conversations meanwhile, and the bomb's own
// message goes on without the hook's change.
func TestGatewayAnswersWhileAScriptBombs(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greedy.lua"), []byte(`function pre_hook(ctx)
  if ctx.message == "bomb" then
    local t = {}
    local i = 0
    while true do
      i = i + 1
      t[i] = {i}
      for _ = 1, 200 do end
    end
  end
  ctx.message = ctx.message .. "!"
  return ctx
end`), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuf{}
	// 2 MiB: the bomb's cost (a Lua loop under -race) grows with the
	// limit, and the answers wait for it on a loaded machine.
	cfg := parseConfig(t, luaConfig(t.TempDir(), fake.BaseURL(), dir, "    limits: { memory_mb: 2, timeout_seconds: 60 }"))
	h := startAppWith(t, cfg, AppOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	waitAccepting(t, h.app.gateway)
	bomb := core.Inbound{Conversation: core.ConversationKey{Channel: "console", Chat: "other"}, MessageID: "bomb-1", UserID: "u", Text: "bomb"}
	if err := h.app.gateway.Accept(context.Background(), bomb); err != nil {
		t.Fatal(err)
	}
	h.send("hello")
	// Both are answered, the bomb without its hook's change; which comes
	// first depends on how fast the bomb fills its 2 MiB (answering
	// meanwhile is TestGatewayAnswersWhileAScriptLoops's).
	got := []string{h.nextWithin(time.Minute), h.nextWithin(time.Minute)}
	slices.Sort(got)
	if want := []string{"echo: bomb", "echo: hello!"}; !slices.Equal(got, want) {
		t.Fatalf("answers %q; want %q", got, want)
	}
	if !strings.Contains(logs.String(), "plugins.lua.limits.memory_mb") {
		t.Fatalf("the bomb's end was not logged as the memory limit:\n%s", logs.String())
	}
}

func TestLuaTestCommand(t *testing.T) {
	t.Parallel()
	seedDir := filepath.Join("..", "..", "lua", "testdata", "seed")
	env := map[string]string{"HOME": t.TempDir()}
	decode := func(t *testing.T, out string) luaTestOutput {
		t.Helper()
		var o luaTestOutput
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, out)
		}
		return o
	}
	t.Run("filter drops", func(t *testing.T) {
		r := runMain(t, env, "", "lua", "test", filepath.Join(seedDir, "filter.lua"), "--message", "free spam", "--llm-fake", "unused")
		o := decode(t, r.stdout)
		if r.code != 0 || o.Hook != "filter" || !o.Drop || o.Reason != "blocked word: spam" || o.Ctx.Message != "free spam" {
			t.Fatalf("exit %d, output %+v; stderr %s", r.code, o, r.stderr)
		}
	})
	t.Run("pre_hook with metadata and fake LLM", func(t *testing.T) {
		r := runMain(t, env, "", "lua", "test", filepath.Join(seedDir, "smart_preprocess.lua"), "--message", "Hola amigo",
			"--metadata", "source=cli", "--hook", "pre_hook", "--llm-fake", "es", "--llm-fake", "Hello friend")
		o := decode(t, r.stdout)
		if r.code != 0 || o.Drop || o.Ctx.Message != "Hello friend" || o.Ctx.Metadata["original_language"] != "es" || o.Ctx.Metadata["source"] != "cli" ||
			len(o.LLMCalls) != 2 || o.LLMCalls[1].Prompt != "Translate to English: Hola amigo" || o.LLMCalls[0].Model != "small" {
			t.Fatalf("exit %d, output %s; stderr %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("post_hook", func(t *testing.T) {
		r := runMain(t, env, "", "lua", "test", filepath.Join(seedDir, "vocabulary_guard.lua"), "--message", "hi guys")
		if o := decode(t, r.stdout); r.code != 0 || o.Hook != "post_hook" || o.Ctx.Message != "hi team" {
			t.Fatalf("exit %d, output %s; stderr %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("kv and a failing hook", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "count.lua")
		os.WriteFile(p, []byte("function pre_hook(ctx)\n  ctx.kv_set('seen', ctx.message)\n  error('nope')\nend\n"), 0o600)
		r := runMain(t, env, "", "lua", "test", p, "--message", "x", "--llm-fake", "-")
		o := decode(t, r.stdout)
		if r.code != 1 || !strings.Contains(o.Error, "count.lua:3: nope") || o.KV["seen"] != "x" || !strings.Contains(r.stderr, "count.lua:3: nope") {
			t.Fatalf("exit %d, output %s; stderr %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("on_schedule of a plugin schedule", func(t *testing.T) {
		// docs/hooks.md: ctx.message is "" for a schedule that runs a plugin.
		p := filepath.Join(t.TempDir(), "digest.lua")
		os.WriteFile(p, []byte("function on_schedule(ctx)\n  if ctx.message == '' then return { reply = 'plugin firing' } end\n  return ctx\nend\n"), 0o600)
		r := runMain(t, env, "", "lua", "test", p, "--message", "", "--hook", "on_schedule")
		if o := decode(t, r.stdout); r.code != 0 || o.Reply != "plugin firing" {
			t.Fatalf("exit %d, output %s; stderr %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"lua", "test", filepath.Join(seedDir, "filter.lua")},
			{"lua", "test", "--message", "x"},
			{"lua", "test", filepath.Join(seedDir, "filter.lua"), "--message", "x", "--hook", "other"},
			{"lua", "test", filepath.Join(seedDir, "filter.lua"), "--message", "x", "--metadata", "novalue"},
			{"lua", "run"},
		} {
			if r := runMain(t, env, "", args...); r.code != 2 || !strings.Contains(r.stderr, "usage: opentalon lua test") && !strings.Contains(r.stderr, "key=value") && !strings.Contains(r.stderr, "use filter, pre_hook, post_hook or on_schedule") {
				t.Errorf("%v: exit %d stderr %s", args, r.code, r.stderr)
			}
		}
	})
	t.Run("ctx.llm without a provider", func(t *testing.T) {
		r := runMain(t, env, "", "lua", "test", filepath.Join(seedDir, "compliance_check.lua"), "--message", "an answer")
		if o := decode(t, r.stdout); r.code != 1 || !strings.Contains(o.Error, "ctx.llm needs a configured provider (or --llm-fake REPLY)") {
			t.Fatalf("exit %d, output %s", r.code, r.stdout)
		}
	})
	t.Run("a broken script names its line", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "broken.lua")
		os.WriteFile(p, []byte("function pre_hook(ctx)\n  return ctx +\nend\n"), 0o600)
		r := runMain(t, env, "", "lua", "test", p, "--message", "x", "--llm-fake", "-")
		if r.code != 1 || !strings.Contains(r.stderr, "broken.lua:3:") {
			t.Fatalf("exit %d stderr %s", r.code, r.stderr)
		}
	})
}

// TestLuaFailuresInTheHookMetric: a Lua hook run that fails is counted in
// opentalon_hook_failures_total by its stage — a guard that fails closed
// and a post_hook that fails open alike — as the metric's help says
// ("Lua scripts, hook plugins"). A script's failure returns no error to
// the hook chain, which counted only errors, so Lua failures stayed 0.
func TestLuaFailuresInTheHookMetric(t *testing.T) {
	t.Parallel()
	fake := providertest.NewOpenAI(t)
	dir := t.TempDir()
	for name, src := range map[string]string{
		"10_guard.lua": `function filter(ctx) if ctx.message:find("boom") then error("guard down") end end`,
		"20_post.lua":  `function post_hook(ctx) if ctx.message:find("bang") then error("enricher down") end return ctx end`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	y := strings.Replace(luaConfig(t.TempDir(), fake.BaseURL(), dir, ""), `listen: ""`, `listen: "127.0.0.1:0"`, 1)
	h := startApp(t, parseConfig(t, y))
	addr := waitAddr(t, h.app)
	h.send("boom")
	h.expect("Sorry, I could not check your message just now, so I did not answer it. Please try again in a moment.")
	h.send("bang")
	h.expect("echo: bang")
	fams := scrape(t, addr, nil)
	for stage, want := range map[string]float64{"pre_hooks": 1, "post_hooks": 1} {
		if got := value(fams, "opentalon_hook_failures_total", map[string]string{"stage": stage}); got != want {
			t.Errorf("opentalon_hook_failures_total{stage=%q} = %v, want %v", stage, got, want)
		}
	}
}
