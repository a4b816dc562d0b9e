package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	"github.com/opentalon/opentalon/store"
)

// buildHostile compiles testdata/hostile into a fresh plugin_dir that
// every user may enter (0755 up to /, as a real plugin_dir is), next to
// a non-executable file the plugin will try to overwrite.
func buildHostile(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin = filepath.Join(dir, "hostile")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/hostile").CombinedOutput(); err != nil {
		t.Fatalf("build the hostile plugin: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "other-plugin"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// secretFiles makes a profiles file (0600 in a 0700 directory) and a
// config file (0644 in a 0755 directory: readable by every user).
func secretFiles(t *testing.T) (profiles, config string) {
	t.Helper()
	private := t.TempDir()
	profiles = filepath.Join(private, "profiles.yaml")
	if err := os.WriteFile(profiles, []byte("openai: sk-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	public := t.TempDir()
	for _, d := range []string{filepath.Dir(public), public} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config = filepath.Join(public, "config.yaml")
	if err := os.WriteFile(config, []byte("models: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return profiles, config
}

func unwrapJSON(t *testing.T, res core.ToolResult) map[string]string {
	t.Helper()
	body, ok := guard.Unwrap(res.Content)
	var m map[string]string
	if !ok || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("plugin answered %+v", res)
	}
	return m
}

// TestHostilePlugin starts a plugin that tries to read the core's
// environment and memory, the database, the profiles and config files,
// and to reach another plugin's sockets, directory and process, under
// each isolation the core offers, and checks that every attempt fails
// (an attempt a mode cannot stop is skipped with the reason).
func TestHostilePlugin(t *testing.T) {
	pluginDir, bin := buildHostile(t)
	profiles, config := secretFiles(t)
	abi, llErr := landlockABI()
	root := os.Geteuid() == 0
	sameUser := ""
	if root {
		sameUser = "root"
	}
	sharedUser := "only Landlock separates plugins that share a run_as user"
	modes := []struct {
		name           string
		sb             Sandbox
		needRoot       bool
		needLandlock   bool
		notCovered     map[string]string // probe → why this mode cannot stop it
		separateUser   bool
		signalsCovered bool
	}{
		{name: "run_as nobody with Landlock", sb: Sandbox{RunAs: "nobody", Landlock: true}, needRoot: true, needLandlock: true, separateUser: true},
		{name: "run_as nobody without Landlock", sb: Sandbox{RunAs: "nobody"}, needRoot: true, separateUser: true, notCovered: map[string]string{
			"config file":           "it is readable by every user; only Landlock keeps a plugin from such files",
			"victim environ":        sharedUser,
			"victim directory":      sharedUser,
			"replace victim socket": sharedUser,
			"signal victim":         sharedUser,
		}},
		{name: "the core's user with Landlock", sb: Sandbox{RunAs: sameUser, Landlock: true}, needLandlock: true},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			if mode.needRoot && !root {
				t.Skip("the core must run as root to start plugins as another user")
			}
			if _, err := user.Lookup(mode.sb.RunAs); mode.separateUser && err != nil {
				t.Skipf("this system has no user %s: %v", mode.sb.RunAs, err)
			}
			if mode.needLandlock && abi == 0 {
				t.Skipf("this kernel offers no Landlock: %v", llErr)
			}
			notCovered := map[string]string{}
			for k, v := range mode.notCovered {
				notCovered[k] = v
			}
			if mode.needLandlock && abi < 6 {
				why := fmt.Sprintf("signal scoping needs Landlock ABI 6; this kernel has %d", abi)
				notCovered["signal victim"] = why
				if !mode.separateUser {
					notCovered["signal core"] = why
				}
			}
			mode.sb.Limits = ProcessLimits{AddressSpace: 3 << 30, OpenFiles: 200, Processes: 400}
			r := &rig{events: make(chan event, 64), db: openDB(t)}
			r.reg = NewRegistry(nil)
			r.guard = guard.New(r.reg, nil, nil)
			r.m = NewManager(Options{
				Dir: pluginDir, Plugins: []Spec{{Path: bin, Env: []string{"OPENTALON_TEST_NAME=victim"}}},
				Registry: r.reg, State: r.db, Bindings: r.db, Sandbox: &mode.sb, Logger: testLogger(t),
				OnEvent: func(p, k string) { r.events <- event{p, k} },
			})
			if err := r.m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.m.Close() })
			if got := r.m.Running(); strings.Join(got, ",") != "hostile,victim" {
				t.Fatalf("running = %v, want hostile and victim", got)
			}
			ctx := context.Background()
			if err := r.db.PluginStateSet(ctx, "victim", "secret", "the victim's secret"); err != nil {
				t.Fatal(err)
			}
			r.m.mu.Lock()
			victim := r.m.running["victim"]
			r.m.mu.Unlock()
			args := map[string]string{
				"core_pid": strconv.Itoa(os.Getpid()), "db": r.db.Path(), "profiles": profiles, "config": config,
				"victim_pid": strconv.Itoa(victim.pgid), "victim_dir": victim.dir,
				"victim_plugin_socket": filepath.Join(victim.dir, "plugin.sock"), "victim_state_socket": filepath.Join(victim.dir, "state.sock"),
				"victim_binary": filepath.Join(pluginDir, "other-plugin"),
			}
			call := func(action string, args map[string]string) map[string]string {
				return unwrapJSON(t, r.guard.Run(ctx, core.ToolCall{ID: action, Plugin: "hostile", Action: action, Args: args}))
			}

			who := call("whoami", nil)
			if mode.separateUser && who["uid"] != "65534" {
				t.Errorf("the plugin runs as uid %s, want nobody (65534)", who["uid"])
			}
			if !strings.HasSuffix(who["no_new_privs"], "1") {
				t.Errorf("no_new_privs not set: %q", who["no_new_privs"])
			}
			if who["as"] != fmt.Sprint(3<<30, "/", 3<<30) || who["nofile"] != "200/200" || who["core"] != "0/0" {
				t.Errorf("resource limits = %v", who)
			}
			if mode.separateUser && who["nproc"] != "400/400" {
				t.Errorf("process limit = %s, want 400/400", who["nproc"])
			}
			if got := call("state", nil)["state"]; got != "reached: own value" {
				t.Errorf("its own state: %s", got)
			}

			seen := call("probe", args)
			if got := seen["own temporary directory"]; !strings.HasPrefix(got, "reached:") {
				t.Errorf("the plugin cannot use its own temporary directory: %s", got)
			}
			delete(seen, "own temporary directory")
			if len(seen) < 14 {
				t.Fatalf("the plugin tried too little: %v", seen)
			}
			for probe, got := range seen {
				t.Run(probe, func(t *testing.T) {
					if why, ok := notCovered[probe]; ok {
						t.Skipf("%s (the plugin got: %s)", why, got)
					}
					if !strings.HasPrefix(got, "denied:") || strings.Contains(got, "victim's secret") || strings.Contains(got, "sk-secret") {
						t.Errorf("%s", got)
					}
					t.Log(got)
				})
			}
		})
	}
}

// TestIsolationReport: the protections in force are logged at start.
func TestIsolationReport(t *testing.T) {
	var buf syncBuf
	iso, err := NewIsolation(Sandbox{Landlock: true, Limits: ProcessLimits{AddressSpace: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	iso.Describe(slogTo(&buf), nil)
	out := buf.String()
	for _, want := range []string{"plugin isolation", "run_as=", "core_non_dumpable=true", "landlock=", "address space 1024 MB"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if _, err := NewIsolation(Sandbox{RunAs: "no-such-user-here"}); os.Geteuid() == 0 && (err == nil || !strings.Contains(err.Error(), "plugins.tools.run_as")) {
		t.Errorf("unknown run_as user: %v", err)
	}
}

// TestLimitsSetBeforeAndAfterStart: with ptrace the limits are in place
// before the plugin's first instruction; where ptrace is not permitted
// they are set right after the start. Both leave the same limits.
func TestLimitsSetBeforeAndAfterStart(t *testing.T) {
	sb := Sandbox{Limits: ProcessLimits{AddressSpace: 3 << 30, OpenFiles: 150}}
	if os.Geteuid() == 0 {
		sb.RunAs = "root"
	}
	for _, ptrace := range []bool{true, false} {
		t.Run(fmt.Sprint("ptrace ", ptrace), func(t *testing.T) {
			iso, err := NewIsolation(sb)
			if err != nil {
				t.Fatal(err)
			}
			iso.ptraceOff.Store(!ptrace)
			p, err := Launch(context.Background(), helperSpec(t, "evil", "lim"), LaunchOptions{Isolation: iso, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			res, err := p.Executor().Execute(context.Background(), core.ToolCall{ID: "1", Action: "limits"})
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(res.Content)
			if len(f) != 4 || f[0] != fmt.Sprint(3<<30, "/", 3<<30) || f[1] != "150/150" || f[3] != "0/0" {
				t.Fatalf("limits (as nofile nproc core) = %q", res.Content)
			}
		})
	}
}

func TestPermissionChecks(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "p")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("group-writable binary refused", func(t *testing.T) {
		if err := os.Chmod(bin, 0o775); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(bin, 0o755)
		_, err := Launch(context.Background(), Spec{Path: bin}, LaunchOptions{})
		if err == nil || !strings.Contains(err.Error(), bin) || !strings.Contains(err.Error(), "chmod go-w "+bin) {
			t.Fatalf("err = %v, want the path and the fix", err)
		}
	})
	t.Run("other-writable plugin_dir refused", func(t *testing.T) {
		if err := os.Chmod(dir, 0o757); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		_, err := Discover(dir, nil)
		if err == nil || !strings.Contains(err.Error(), "plugins.tools.plugin_dir "+dir) || !strings.Contains(err.Error(), "chmod go-w "+dir) {
			t.Fatalf("err = %v, want the key, the path and the fix", err)
		}
	})
	t.Run("binary in a writable directory refused", func(t *testing.T) {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		if err := checkBinary(bin); err == nil || !strings.Contains(err.Error(), "chmod go-w "+dir) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unreachable for the run_as user", func(t *testing.T) {
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o755)
		err := checkRunnableBy(bin, 65534, 65534, "nobody")
		if err == nil || !strings.Contains(err.Error(), "chmod o+x "+dir) {
			t.Fatalf("err = %v, want the directory and the fix", err)
		}
	})
}

// TestNameBoundToBinaryInTheDatabase: the binding outlives the core; a
// different binary claiming the name later is refused with a clear log
// line and never restarted, and the rightful binary still registers.
func TestNameBoundToBinaryInTheDatabase(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exe, _ := os.Executable()
	copyDir := t.TempDir()
	impostor := filepath.Join(copyDir, "impostor")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// Same program, other content: a changed binary is another binary.
	if err := os.WriteFile(impostor, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, spec Spec) (*rig, *syncBuf) {
		var logs syncBuf
		r := &rig{events: make(chan event, 64), db: db}
		r.reg = NewRegistry(nil)
		r.m = NewManager(Options{Plugins: []Spec{spec}, Registry: r.reg, State: db, Bindings: db,
			RestartOnFailure: true, MaxRestarts: 3, Logger: slogTo(&logs),
			Sleep:   func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			OnEvent: func(p, k string) { r.events <- event{p, k} }})
		if err := r.m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.m.Close() })
		return r, &logs
	}
	first, _ := run(t, helperSpec(t, "evil", "victim"))
	if got := first.m.Running(); strings.Join(got, ",") != "victim" {
		t.Fatalf("running = %v", got)
	}
	first.m.Close()
	b, _ := db.PluginBindings(context.Background())
	if len(b) != 1 || b[0].Path != exe {
		t.Fatalf("bindings = %+v, want victim bound to %s", b, exe)
	}

	imp := helperSpec(t, "evil", "victim")
	imp.Path = impostor
	second, logs := run(t, imp)
	second.waitEvent(t, "victim", "gave_up")
	if got := second.m.Running(); len(got) != 0 {
		t.Fatalf("the impostor registered: %v", got)
	}
	for _, want := range []string{`the plugin name \"victim\" belongs to ` + exe, impostor, "opentalon plugins unbind victim"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "plugin failed to start"); n != 1 {
		t.Errorf("the refused plugin was started %d times, want once (no restarts)", n)
	}
	second.m.Close()

	third, _ := run(t, helperSpec(t, "evil", "victim"))
	if got := third.m.Running(); strings.Join(got, ",") != "victim" {
		t.Fatalf("the rightful binary was not registered again: %v", got)
	}
}

// TestStateQuotasAndWriteRate: a plugin cannot pass its quotas or write
// faster than allowed; the errors name the keys to change.
func TestStateQuotasAndWriteRate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	r := startRig(t, nil, Options{Now: clock, StateLimits: StateLimits{
		Quota: core.PluginStateQuota{MaxKeys: 3, MaxBytes: 64}, WritesPerSecond: 5}}, helperSpec(t, "evil", "evil"))
	set := func(key, value string) core.ToolResult {
		return r.call("state_set", map[string]string{"key": key, "value": value})
	}
	for i := range 3 {
		if res := set(fmt.Sprint("k", i), "v"); res.Error != "" {
			t.Fatalf("set k%d: %s", i, res.Error)
		}
	}
	if res := set("k3", "v"); !strings.Contains(res.Error, "ResourceExhausted") || !strings.Contains(res.Error, "plugins.tools.state.max_keys") {
		t.Fatalf("fourth key: %+v", res)
	}
	if res := set("k0", strings.Repeat("x", 100)); !strings.Contains(res.Error, "plugins.tools.state.max_bytes") {
		t.Fatalf("growing past max_bytes: %+v", res)
	}
	if keys, _ := r.db.PluginStateKeys(context.Background(), "evil", ""); strings.Join(keys, ",") != "k0,k1,k2" {
		t.Fatalf("keys = %v", keys)
	}
	// 5 writes so far against a burst of 10: 5 more pass, the 6th not.
	for i := range 5 {
		if res := r.call("state_delete", map[string]string{"key": "gone"}); res.Error != "" {
			t.Fatalf("delete %d: %s", i, res.Error)
		}
	}
	if res := r.call("state_delete", map[string]string{"key": "gone"}); !strings.Contains(res.Error, "plugins.tools.state.writes_per_second") {
		t.Fatalf("write past the rate: %+v", res)
	}
	now = now.Add(time.Second)
	if res := r.call("state_delete", map[string]string{"key": "gone"}); res.Error != "" {
		t.Fatalf("a second later: %s", res.Error)
	}
}

// syncBuf collects log output written from several goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestUnreachableBinaryRunsFromACopy: with the core as root and plugins
// as nobody, a plugin binary in a directory nobody may enter (as under
// /root, or t.TempDir's 0700 parent) runs from a private copy only the
// core may write, removed when it stops; a script there (whose
// interpreter may read files beside it) is still refused with the fix.
func TestUnreachableBinaryRunsFromACopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the core must run as root to start plugins as another user")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skipf("this system has no user nobody: %v", err)
	}
	private := t.TempDir() // its parent is 0700
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := helperSpec(t, "evil", "copied")
	data, err := os.ReadFile(spec.Path)
	if err != nil {
		t.Fatal(err)
	}
	spec.Path = filepath.Join(private, "plugin")
	if err := os.WriteFile(spec.Path, data, 0o700); err != nil {
		t.Fatal(err)
	}
	iso, err := NewIsolation(Sandbox{RunAs: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Launch(context.Background(), spec, LaunchOptions{Isolation: iso, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("a binary nobody cannot reach: %v; want it run from a copy", err)
	}
	res, err := p.Executor().Execute(context.Background(), core.ToolCall{ID: "1", Action: "echo", Args: map[string]string{"text": "hi"}})
	if err != nil || res.Content != "hi" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	if p.Binary.Path != spec.Path {
		t.Fatalf("the plugin is known as %s; want its own path %s (its name binding)", p.Binary.Path, spec.Path)
	}
	staged := p.staged
	for _, path := range []string{staged, filepath.Join(staged, "plugin")} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o711 {
			t.Fatalf("%s: %v %v; want 0711 (run, not read, by others)", path, fi, err)
		}
	}
	if sum := sha256.Sum256(data); p.Binary.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("the binding's hash %s is not the binary's", p.Binary.SHA256)
	}
	p.Close()
	if _, err := os.Stat(staged); !os.IsNotExist(err) {
		t.Fatalf("the copy outlived the plugin: %v", err)
	}
	// Not copied: a path through a symbolic link (another user's link to a
	// file of root's), a file another user owns, a noexec temporary
	// directory. The refusal keeps the fix.
	link := filepath.Join(private, "link")
	if err := os.Symlink(spec.Path, link); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(private, "foreign")
	if err := os.WriteFile(foreign, data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 1, 1); err != nil {
		t.Fatal(err)
	}
	for path, why := range map[string]string{link: "symbolic link", foreign: "owned by the core's user"} {
		_, err := Launch(context.Background(), Spec{Path: path, Env: spec.Env}, LaunchOptions{Isolation: iso, Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), "chmod o+x") || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v; want the refusal with the fix, and why no copy was made (%s)", path, err, why)
		}
	}
	noexec := t.TempDir()
	if err := syscall.Mount("tmpfs", noexec, "tmpfs", syscall.MS_NOEXEC, "size=1m"); err != nil {
		t.Logf("no noexec tmpfs to try a copy into (%v); that case is not checked here", err)
	} else {
		defer syscall.Unmount(noexec, 0)
		if _, _, _, err := stageBinary(noexec, spec.Path); err == nil || !strings.Contains(err.Error(), "noexec") || !strings.Contains(err.Error(), "TMPDIR") {
			t.Errorf("a copy into a noexec directory: %v; want it refused, naming noexec and TMPDIR", err)
		}
	}
	script := filepath.Join(private, "script-plugin")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Launch(context.Background(), Spec{Path: script}, LaunchOptions{Isolation: iso, Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), "chmod o+x") {
		t.Fatalf("a script nobody cannot reach: %v; want the refusal with the fix", err)
	}
}
