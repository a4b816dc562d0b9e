package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	"github.com/opentalon/opentalon/store"
)

type event struct{ plugin, kind string }

type rig struct {
	m      *Manager
	reg    *Registry
	guard  *guard.Pipeline
	db     *store.DB
	events chan event
}

func openDB(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startRig(t *testing.T, limits map[string]Limits, o Options, specs ...Spec) *rig {
	t.Helper()
	r := &rig{events: make(chan event, 64), db: openDB(t)}
	r.reg = NewRegistry(func(p string) Limits { return limits[p] })
	r.guard = guard.New(r.reg, nil, nil)
	o.Plugins = specs
	o.Registry = r.reg
	o.State = r.db
	o.Logger = testLogger(t)
	o.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	o.OnEvent = func(p, k string) { r.events <- event{p, k} }
	r.m = NewManager(o)
	if err := r.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.m.Close() })
	return r
}

// waitEvent waits for the next event of plugin (bounded so a broken
// build fails instead of hanging; not a timing assertion).
func (r *rig) waitEvent(t *testing.T, plugin, kind string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-r.events:
			if e.plugin == plugin && e.kind == kind {
				return
			}
		case <-deadline:
			t.Fatalf("no %q event for plugin %s", kind, plugin)
		}
	}
}

func (r *rig) call(action string, args map[string]string) core.ToolResult {
	return r.guard.Run(context.Background(), core.ToolCall{ID: "call-" + action, Plugin: "evil", Action: action, Args: args})
}

func TestMaliciousPlugin(t *testing.T) {
	// victim has a short timeout for the sleep case; evil a long one so
	// the 10 MB case is not cut short on a loaded machine.
	r := startRig(t, map[string]Limits{"evil": {Timeout: time.Minute, MaxResponseBytes: 64 * 1024}, "victim": {Timeout: 300 * time.Millisecond}},
		Options{RestartOnFailure: true, MaxRestarts: 3, HealthTimeout: 300 * time.Millisecond},
		helperSpec(t, "evil", "evil"), helperSpec(t, "evil", "victim"))
	if got := r.m.Running(); strings.Join(got, ",") != "evil,victim" {
		t.Fatalf("running = %v, want evil and victim", got)
	}

	t.Run("echo passes wrapped", func(t *testing.T) {
		res := r.call("echo", map[string]string{"text": "hello"})
		if res.Error != "" || res.Content != guard.Wrap("hello") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("missing required argument never reaches the plugin", func(t *testing.T) {
		res := r.call("echo", nil)
		if !strings.Contains(res.Error, "missing required argument") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("fake tool calls stripped", func(t *testing.T) {
		res := r.call("fake_calls", nil)
		if res.Error != "" {
			t.Fatal(res.Error)
		}
		for _, bad := range []string{"[tool_call]", "<function_call", `"tool_calls"`, `"type":"function"`, `"function_call"`, `"type":"tool_use"`, "<invoke", "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", `"functionCall"`} {
			if strings.Contains(res.Content, bad) {
				t.Errorf("output still contains %s:\n%s", bad, res.Content)
			}
		}
		if n := strings.Count(res.Content, guard.Removed); n < len(fakeShapes) {
			t.Errorf("only %d removals for %d shapes", n, len(fakeShapes))
		}
	})
	t.Run("cannot break out of the block", func(t *testing.T) {
		res := r.call("breakout", nil)
		c := res.Content
		if !strings.HasPrefix(c, guard.OpenMarker+"\n") || !strings.HasSuffix(c, "\n"+guard.CloseMarker) {
			t.Fatalf("not wrapped: %q", c)
		}
		if strings.Count(c, guard.CloseMarker) != 1 || strings.Count(c, guard.OpenMarker) != 1 {
			t.Fatalf("plugin output added block markers: %q", c)
		}
		if !strings.Contains(c, "(/plugin_output)") {
			t.Fatalf("inner marker not escaped: %q", c)
		}
	})
	t.Run("10 MB output truncated with notice", func(t *testing.T) {
		res := r.call("huge", nil)
		if res.Error != "" {
			t.Fatal(res.Error)
		}
		if len(res.Content) > 64*1024+200 {
			t.Fatalf("content is %d bytes, want about 64 KB", len(res.Content))
		}
		if !strings.Contains(res.Content, "[truncated: the plugin returned 10485760 bytes") {
			t.Fatalf("no truncation notice in %q", res.Content[len(res.Content)-200:])
		}
	})
	t.Run("wrong call id → generic error", func(t *testing.T) {
		res := r.call("wrong_id", nil)
		if res.Error != guard.GenericError || strings.Contains(res.Content, "trust me") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("binary output → generic error", func(t *testing.T) {
		res := r.call("binary", nil)
		if res.Error != guard.GenericError {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("sleep past the timeout → error result", func(t *testing.T) {
		start := time.Now()
		res := r.guard.Run(context.Background(), core.ToolCall{ID: "s", Plugin: "victim", Action: "sleep"})
		took := time.Since(start)
		if !strings.Contains(res.Error, "plugin victim did not answer within 300ms") {
			t.Fatalf("got %+v", res)
		}
		t.Logf("timed-out call returned after %s (timeout 300ms)", took)
	})
	t.Run("state isolation", func(t *testing.T) {
		ctx := context.Background()
		if err := r.db.PluginStateSet(ctx, "victim", "secret", "the victim's secret"); err != nil {
			t.Fatal(err)
		}
		if err := r.db.PluginStateSet(ctx, "evil", "mine", "evil's own"); err != nil {
			t.Fatal(err)
		}
		r.m.mu.Lock()
		victimSock := filepath.Join(r.m.running["victim"].dir, "state.sock")
		victimPid := strconv.Itoa(r.m.running["victim"].pgid)
		r.m.mu.Unlock()
		res := r.guard.Run(ctx, core.ToolCall{ID: "s1", Plugin: "evil", Action: "snoop", Args: map[string]string{"victim": "victim", "victim_socket": victimSock, "victim_pid": victimPid}})
		body := strings.TrimSuffix(strings.TrimPrefix(res.Content, guard.OpenMarker+"\n"), "\n"+guard.CloseMarker)
		var seen map[string]string
		if err := json.Unmarshal([]byte(body), &seen); err != nil {
			t.Fatalf("snoop output %q: %v", res.Content, err)
		}
		if len(seen) < 8 {
			t.Fatalf("snoop tried too little: %v", seen)
		}
		for k, v := range seen {
			if strings.Contains(v, "victim's secret") {
				t.Errorf("%s: plugin read another plugin's state: %s", k, v)
			}
		}
		if seen["keys"] != "mine" {
			t.Errorf("keys = %q, want only its own key", seen["keys"])
		}
		if !strings.HasPrefix(seen["join victim group"], "error:") {
			t.Errorf("joining the victim's process group: %q, want refused", seen["join victim group"])
		}
		if !strings.HasPrefix(seen["victim socket"], "error:") {
			t.Errorf("connecting to the victim's state socket: %q, want refused", seen["victim socket"])
		}
	})
	t.Run("crash mid-call → error result, core alive, plugin restarted", func(t *testing.T) {
		res := r.call("crash", nil)
		if !strings.Contains(res.Error, "plugin evil failed to run the call") {
			t.Fatalf("got %+v", res)
		}
		r.waitEvent(t, "evil", "deregistered")
		r.waitEvent(t, "evil", "registered")
		if res := r.call("echo", map[string]string{"text": "back"}); res.Content != guard.Wrap("back") {
			t.Fatalf("after restart: %+v", res)
		}
	})
	t.Run("failed health check → restarted", func(t *testing.T) {
		if res := r.call("sick", nil); res.Error != "" {
			t.Fatal(res.Error)
		}
		if failed := r.m.CheckHealth(context.Background()); strings.Join(failed, ",") != "evil" {
			t.Fatalf("CheckHealth failed = %v, want [evil]", failed)
		}
		r.waitEvent(t, "evil", "registered")
		if !r.reg.HasAction("evil", "echo") {
			t.Fatal("evil not re-registered")
		}
		if failed := r.m.CheckHealth(context.Background()); len(failed) != 0 {
			t.Fatalf("after restart CheckHealth failed = %v", failed)
		}
	})
}

func TestRestartGivesUp(t *testing.T) {
	r := startRig(t, nil, Options{RestartOnFailure: true, MaxRestarts: 2}, helperSpec(t, "evil", "evil"))
	for i := range 3 {
		if res := r.call("crash", nil); res.Error == "" {
			t.Fatalf("crash %d: no error", i)
		}
		r.waitEvent(t, "evil", "deregistered")
		if i < 2 {
			r.waitEvent(t, "evil", "registered")
		}
	}
	r.waitEvent(t, "evil", "gave_up")
	if res := r.call("echo", map[string]string{"text": "x"}); !strings.Contains(res.Error, "unknown tool") {
		t.Fatalf("after giving up: %+v, want unknown tool", res)
	}
}

func TestShutdownStopsTheWholePlugin(t *testing.T) {
	r := startRig(t, nil, Options{}, helperSpec(t, "evil", "evil"))
	res := r.call("spawn", nil)
	body := strings.TrimSuffix(strings.TrimPrefix(res.Content, guard.OpenMarker+"\n"), "\n"+guard.CloseMarker)
	pid, err := strconv.Atoi(body)
	if err != nil {
		t.Fatalf("spawn: %+v", res)
	}
	if !alive(pid) {
		t.Fatalf("child %d not running before Close", pid)
	}
	r.m.Close()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin's child %d survived Close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestLaunchErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("exits during start-up", func(t *testing.T) {
		_, err := Launch(ctx, helperSpec(t, "exit", "x"), LaunchOptions{})
		if err == nil || !strings.Contains(err.Error(), "exited during start-up") || !strings.Contains(err.Error(), "refusing to start (on purpose)") {
			t.Fatalf("err = %v, want exit and the plugin's last output", err)
		}
	})
	t.Run("never serves", func(t *testing.T) {
		_, err := Launch(ctx, helperSpec(t, "silent", "x"), LaunchOptions{StartTimeout: 200 * time.Millisecond, StopGrace: 50 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), EnvPluginSocket) {
			t.Fatalf("err = %v, want it to name %s", err, EnvPluginSocket)
		}
	})
	t.Run("invalid name", func(t *testing.T) {
		_, err := Launch(ctx, helperSpec(t, "evil", "bad/name"), LaunchOptions{})
		if err == nil || !strings.Contains(err.Error(), `plugin name "bad/name" is invalid`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing binary", func(t *testing.T) {
		_, err := Launch(ctx, Spec{Path: filepath.Join(t.TempDir(), "nope")}, LaunchOptions{})
		if err == nil || !strings.Contains(err.Error(), "plugins.tools.plugin_dir") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestInvalidCapabilitiesAreNotRestarted: a plugin whose declaration
// fails validation is refused once, not restarted with backoff: the same
// binary declares the same again.
func TestInvalidCapabilitiesAreNotRestarted(t *testing.T) {
	var sleeps atomic.Int32
	events := make(chan event, 8)
	m := NewManager(Options{Plugins: []Spec{helperSpec(t, "evil", "bad/name")}, Registry: NewRegistry(nil), State: openDB(t),
		Logger: testLogger(t), RestartOnFailure: true, MaxRestarts: 3,
		Sleep:   func(ctx context.Context, d time.Duration) error { sleeps.Add(1); return ctx.Err() },
		OnEvent: func(p, k string) { events <- event{p, k} }})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	select {
	case e := <-events:
		if e.kind != "gave_up" {
			t.Fatalf("event %+v, want gave_up", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no gave_up event for the invalid plugin")
	}
	if n := sleeps.Load(); n != 0 {
		t.Fatalf("the invalid plugin was restarted %d times, want none", n)
	}
}

func TestNameCannotBeTakenOver(t *testing.T) {
	// Two different binaries declaring one name: the second is refused,
	// so it can never be bound to the first one's state.
	exe, _ := os.Executable()
	link := filepath.Join(t.TempDir(), "impostor")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	imp := helperSpec(t, "evil", "victim")
	imp.Path = link
	r := startRig(t, nil, Options{}, helperSpec(t, "evil", "victim"), imp)
	if got := r.m.Running(); strings.Join(got, ",") != "victim" {
		t.Fatalf("running = %v", got)
	}
	// Both start at once, so either may win; the loser must be refused.
	r.waitEvent(t, "victim", "gave_up")
	r.m.mu.Lock()
	running := r.m.running["victim"].Spec.Path
	owner := r.m.owners["victim"].Path
	r.m.mu.Unlock()
	if running != owner {
		t.Fatalf("running victim is %s but the name belongs to %s", running, owner)
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"b-plugin": 0o755, "a-plugin": 0o700, "readme.txt": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	specs, err := Discover(dir, []Spec{{Path: "/opt/explicit"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, filepath.Base(s.Path))
	}
	if strings.Join(got, ",") != "a-plugin,b-plugin,explicit" {
		t.Fatalf("Discover = %v", got)
	}
	if _, err := Discover(filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "plugins.tools.plugin_dir") {
		t.Fatalf("missing dir: %v", err)
	}
}
