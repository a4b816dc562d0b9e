package lua

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

func tagScript(tag string) string {
	return `function post_hook(ctx) ctx.message = ctx.message .. " [` + tag + `]" return ctx end`
}

func TestHotReload(t *testing.T) {
	te := startEngine(t, map[string]string{"b_tag.lua": tagScript("v1")}, func(o *Options) { o.Watch = true })
	post := func() string { return te.post(t, input("q"), "answer") }
	if got := post(); got != "answer [v1]" {
		t.Fatalf("initial = %q", got)
	}

	// A change takes effect on the next message.
	writeScript(t, te.dir, "b_tag.lua", tagScript("v2"))
	waitFor(t, func() bool { return post() == "answer [v2]" }, "the changed script")

	// A broken edit keeps the previous version, and says where it broke.
	writeScript(t, te.dir, "b_tag.lua", "function post_hook(ctx)\n  ctx.message = ctx.message ..\n  return ctx\nend\n")
	waitFor(t, func() bool {
		return strings.Contains(te.logs.String(), "lua script not reloaded; its previous version keeps running")
	}, "the compile error to be logged")
	if got := post(); got != "answer [v2]" {
		t.Fatalf("after a broken edit = %q, want the previous version", got)
	}
	if logs := te.logs.String(); !strings.Contains(logs, "b_tag.lua:3:") {
		t.Errorf("the compile error does not name the line:\n%s", logs)
	}

	// A new file joins in file-name order; a fixed one comes back.
	writeScript(t, te.dir, "a_tag.lua", tagScript("a"))
	writeScript(t, te.dir, "b_tag.lua", tagScript("v3"))
	waitFor(t, func() bool { return post() == "answer [a] [v3]" }, "the new and the fixed script")

	// A rename moves the script in the order; a delete removes it.
	if err := os.Rename(filepath.Join(te.dir, "a_tag.lua"), filepath.Join(te.dir, "c_tag.lua")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return post() == "answer [v3] [a]" }, "the renamed script")
	if err := os.Remove(filepath.Join(te.dir, "b_tag.lua")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return post() == "answer [a]" }, "the deleted script to go")
	// Files that are not .lua are ignored.
	writeScript(t, te.dir, "notes.txt", "function post_hook(ctx) error('no') end")
	writeScript(t, te.dir, ".hidden.lua", tagScript("hidden"))
	if got := post(); got != "answer [a]" {
		t.Fatalf("with a .txt and a hidden file = %q", got)
	}
}

// At start a script that does not compile fails the start with its file
// and line; a missing directory names the config key.
func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "bad.lua", "function pre_hook(ctx)\n  return ctx +\nend\n")
	e := New(Options{Dir: dir})
	err := e.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "bad.lua")+":3:") {
		t.Fatalf("start = %v, want the file and line of the error", err)
	}
	rt := t.TempDir()
	writeScript(t, rt, "top.lua", "error('refused at load')\nfunction pre_hook(ctx) return ctx end\n")
	if err := New(Options{Dir: rt}).Start(t.Context()); err == nil || err.Error() != filepath.Join(rt, "top.lua")+":1: refused at load" {
		t.Fatalf("a failing top level: %v", err)
	}
	if err := New(Options{Dir: filepath.Join(dir, "missing")}).Start(t.Context()); err == nil || !strings.Contains(err.Error(), "plugins.lua.scripts_dir") {
		t.Fatalf("missing dir: %v", err)
	}
}

// A broken edit is reported once: later reloads (another script's edit,
// an editor's extra events) do not compile and log the same broken
// content again while the previous version keeps running; a new edit of
// the broken file is tried again.
func TestBrokenEditLoggedOnce(t *testing.T) {
	te := startEngine(t, map[string]string{"a_tag.lua": tagScript("a"), "b_tag.lua": tagScript("b")}, nil)
	broken := "function post_hook(ctx)\n  ctx.message = ctx.message ..\n  return ctx\nend\n"
	const notReloaded = "lua script not reloaded; its previous version keeps running"
	writeScript(t, te.dir, "b_tag.lua", broken)
	te.reload(t.Context())
	writeScript(t, te.dir, "a_tag.lua", tagScript("a2"))
	te.reload(t.Context())
	te.reload(t.Context())
	if got := te.post(t, input("q"), "answer"); got != "answer [a2] [b]" {
		t.Fatalf("post = %q, want the changed a and the previous b", got)
	}
	if n := strings.Count(te.logs.String(), notReloaded); n != 1 {
		t.Fatalf("the broken edit was logged %d times, want once:\n%s", n, te.logs.String())
	}
	// Another broken edit is new content: it is reported too.
	writeScript(t, te.dir, "b_tag.lua", broken+"\n-- still broken\n")
	te.reload(t.Context())
	if n := strings.Count(te.logs.String(), notReloaded); n != 2 {
		t.Fatalf("a second broken edit: logged %d times in all, want 2", n)
	}
	// The fix is picked up.
	writeScript(t, te.dir, "b_tag.lua", tagScript("b2"))
	te.reload(t.Context())
	if got := te.post(t, input("q"), "answer"); got != "answer [a2] [b2]" {
		t.Fatalf("after the fix post = %q", got)
	}
}

// A script saved with a UTF-8 byte order mark, or starting with a "#!"
// line, loads as the lua command loads it; lines keep their numbers.
func TestBOMAndShebang(t *testing.T) {
	te := startEngine(t, map[string]string{
		"bom.lua":     "\xef\xbb\xbffunction pre_hook(ctx)\n  error(\"line 2\")\nend\n",
		"shebang.lua": "#!/usr/bin/env lua\nfunction pre_hook(ctx)\n  error(\"line 3\")\nend\n",
	}, nil)
	for file, want := range map[string]string{"bom.lua": "bom.lua:2: line 2", "shebang.lua": "shebang.lua:3: line 3"} {
		if _, err := te.runErr(t, file, "x"); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %q", file, err, want)
		}
	}
}

// Scripts mounted from a Kubernetes ConfigMap are symlinks through a
// "..data" link that an update swaps atomically: no event names a *.lua
// file, and the change is still picked up.
func TestReloadThroughASymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, ".."+v), 0o755); err != nil {
			t.Fatal(err)
		}
		writeScript(t, filepath.Join(dir, ".."+v), "tag.lua", tagScript(v))
	}
	for _, l := range [][2]string{{"..v1", "..data"}, {filepath.Join("..data", "tag.lua"), "tag.lua"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	te := &testEngine{dir: dir, logs: &syncBuf{}}
	o := baseOptions()
	o.Dir, o.Watch = dir, true
	te.Engine = New(o)
	if err := te.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { te.Close() })
	if got := te.post(t, input("q"), "answer"); got != "answer [v1]" {
		t.Fatalf("initial = %q", got)
	}
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return te.post(t, input("q"), "answer") == "answer [v2]" }, "the swapped script")
}

// The watcher reloads on a script's events and on a ConfigMap's swap, and
// leaves other files alone: a database or a log kept in the directory
// would otherwise put every reload off for as long as it is written.
func TestReloadsOn(t *testing.T) {
	for name, want := range map[string]bool{
		"filter.lua":                   true,
		"..data":                       true,
		"..data_tmp":                   true,
		"..2026_11_29_10_00_00.123456": true,
		"opentalon.db":                 false,
		"opentalon.db-wal":             false,
		".filter.lua.swp":              false,
		"filter.lua~":                  false,
		"4913":                         false,
		"gateway.log":                  false,
	} {
		if got := reloadsOn(filepath.Join("scripts", name)); got != want {
			t.Errorf("reloadsOn(%q) = %v, want %v", name, got, want)
		}
	}
}

// A broken edit is told to the operator once per version of the file,
// naming its file:line, and Scripts shows it beside the version that
// keeps running; the fix clears it. A new file that never compiled is
// listed as not loaded.
func TestBrokenReloadReported(t *testing.T) {
	rec := &recorder{}
	te := startEngine(t, map[string]string{"b_tag.lua": tagScript("b")}, func(o *Options) { o.Events = rec })
	reloads := func() []core.OpsEvent {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var out []core.OpsEvent
		for _, e := range rec.got {
			if e.Details["hook"] == "reload" {
				out = append(out, e)
			}
		}
		return out
	}
	script := func(file string) Script {
		t.Helper()
		for _, s := range te.Scripts() {
			if s.File == file {
				return s
			}
		}
		t.Fatalf("%s not in Scripts: %+v", file, te.Scripts())
		return Script{}
	}
	good := script("b_tag.lua")
	if !good.Loaded || len(good.Version) != 12 || good.Modified.IsZero() || good.ReloadError != "" {
		t.Fatalf("a loaded script: %+v", good)
	}

	broken := "function post_hook(ctx)\n  ctx.message = ctx.message ..\n  return ctx\nend\n"
	writeScript(t, te.dir, "b_tag.lua", broken)
	te.reload(t.Context())
	te.reload(t.Context())
	evs := reloads()
	if len(evs) != 1 {
		t.Fatalf("%d reload events, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Kind != core.EventLuaHookFailed || ev.Subject != "b_tag.lua" ||
		!strings.Contains(ev.Message, "b_tag.lua:3:") || !strings.Contains(ev.Message, "the last good version keeps running") ||
		!strings.HasPrefix(ev.Once, "lua_reload|b_tag.lua|") {
		t.Fatalf("event = %+v", ev)
	}
	s := script("b_tag.lua")
	if !s.Loaded || s.Version != good.Version || !s.Modified.Equal(good.Modified) || !strings.Contains(s.ReloadError, "b_tag.lua:3:") {
		t.Fatalf("after a broken edit: %+v, want version %s running and the error", s, good.Version)
	}
	if got := te.post(t, input("q"), "answer"); got != "answer [b]" {
		t.Fatalf("post = %q, want the last good version", got)
	}

	// Undone to the very version that runs (content and time): the
	// error goes, nothing reloads.
	path := filepath.Join(te.dir, "b_tag.lua")
	writeScript(t, te.dir, "b_tag.lua", tagScript("b"))
	if err := os.Chtimes(path, good.Modified, good.Modified); err != nil {
		t.Fatal(err)
	}
	te.reload(t.Context())
	if s := script("b_tag.lua"); s.ReloadError != "" || s.Version != good.Version {
		t.Fatalf("after the broken edit was undone: %+v", s)
	}
	writeScript(t, te.dir, "b_tag.lua", broken)
	te.reload(t.Context())
	if n := len(reloads()); n != 2 {
		t.Fatalf("the same broken edit again: %d reload events in all, want 2", n)
	}

	// Another broken version is told again; a new file that does not
	// compile is listed, not loaded.
	writeScript(t, te.dir, "b_tag.lua", broken+"-- still\n")
	writeScript(t, te.dir, "c_new.lua", "function pre_hook(ctx\n")
	te.reload(t.Context())
	evs = reloads()
	if n := len(evs); n != 4 {
		t.Fatalf("%d reload events in all, want 4", n)
	}
	if evs[2].Once == ev.Once {
		t.Errorf("two versions of the file share the Once key %q: the sinks would drop the second", ev.Once)
	}
	if c := script("c_new.lua"); c.Loaded || c.Version != "" || !strings.Contains(c.ReloadError, "c_new.lua:") {
		t.Fatalf("a new broken file: %+v", c)
	}

	// The fix clears the error and runs the new version.
	writeScript(t, te.dir, "b_tag.lua", tagScript("b2"))
	if err := os.Remove(filepath.Join(te.dir, "c_new.lua")); err != nil {
		t.Fatal(err)
	}
	te.reload(t.Context())
	s = script("b_tag.lua")
	if s.ReloadError != "" || s.Version == good.Version || len(te.Scripts()) != 1 {
		t.Fatalf("after the fix: %+v", te.Scripts())
	}
	if n := len(reloads()); n != 4 {
		t.Fatalf("the fix emitted a reload event: %d in all", n)
	}
}

// A syntax error quotes its token, which may be a long string of the
// file (and not valid UTF-8): what reaches the sinks and the status page
// is cut, like a run's error.
func TestBrokenReloadErrorIsCut(t *testing.T) {
	rec := &recorder{}
	te := startEngine(t, map[string]string{"b_tag.lua": tagScript("b")}, func(o *Options) { o.Events = rec })
	writeScript(t, te.dir, "b_tag.lua", "local \""+strings.Repeat("A", 50000)+"\xff\"\n")
	te.reload(t.Context())
	rec.mu.Lock()
	evs := append([]core.OpsEvent(nil), rec.got...)
	rec.mu.Unlock()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	sc := te.Scripts()[0]
	for what, text := range map[string]string{"event": evs[0].Message, "reload_error": sc.ReloadError} {
		if len(text) > maxLogMsg+200 || !utf8.ValidString(text) || !strings.Contains(text, "bytes more)") {
			t.Errorf("%s: %d bytes (valid UTF-8 %v), want it cut to about %d", what, len(text), utf8.ValidString(text), maxLogMsg)
		}
	}
}
