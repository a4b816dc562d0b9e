package lua

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// docLuaBlocks returns every ```lua block of docs/hooks.md with the script
// name its first line gives ("-- filter.lua: ..."), or "" when it names
// none.
func docLuaBlocks(t *testing.T) []struct{ name, src string } {
	t.Helper()
	doc, err := os.ReadFile("../docs/hooks.md")
	if err != nil {
		t.Fatal(err)
	}
	blockRE := regexp.MustCompile("(?s)```lua\n(.*?)```")
	nameRE := regexp.MustCompile(`^-- (\S+\.lua)\b`)
	var out []struct{ name, src string }
	for _, m := range blockRE.FindAllStringSubmatch(string(doc), -1) {
		name := ""
		if n := nameRE.FindStringSubmatch(m[1]); n != nil {
			name = n[1]
		}
		out = append(out, struct{ name, src string }{name, m[1]})
	}
	if len(out) == 0 {
		t.Fatal("docs/hooks.md holds no ```lua blocks; did the fence change?")
	}
	return out
}

// TestHooksDocLuaBlocks runs every ```lua block of docs/hooks.md through
// the sandbox, as an author who copies it into scripts_dir would: it must
// load and define the hook its text shows, a block that is one of the
// seed scripts must be the file under testdata/seed byte for byte (the
// seed tests check what those do), and a run of each hook must not fail.
func TestHooksDocLuaBlocks(t *testing.T) {
	hookRE := regexp.MustCompile(`(?m)^function (filter|pre_hook|post_hook|on_schedule)\(ctx\)`)
	for i, b := range docLuaBlocks(t) {
		name := b.name
		if name == "" {
			name = "block_" + strconv.Itoa(i+1) + ".lua"
		}
		t.Run(name, func(t *testing.T) {
			if want, err := os.ReadFile("testdata/seed/" + name); err == nil && string(want) != b.src {
				t.Errorf("docs/hooks.md's %s differs from testdata/seed/%s; keep them the same", name, name)
			}
			var hooks []string
			for _, m := range hookRE.FindAllStringSubmatch(b.src, -1) {
				hooks = append(hooks, m[1])
			}
			if len(hooks) == 0 {
				t.Fatalf("block defines no hook:\n%s", b.src)
			}
			te := startEngine(t, map[string]string{name: b.src}, nil)
			te.llm.answer = func(string) string { return "en" }
			scripts := te.Scripts()
			if len(scripts) != 1 || strings.Join(scripts[0].Hooks, ",") != strings.Join(hooks, ",") {
				t.Fatalf("loaded %+v, want %s with hooks %v\nlog:\n%s", scripts, name, hooks, te.logs.String())
			}
			for _, h := range hooks {
				if h == HookSchedule {
					f := core.Firing{ScheduleID: 1, At: time.Unix(1777626000, 0), Conversation: core.ConversationKey{Channel: "console", Chat: "local"}, Creator: "u1"}
					if _, err := te.OnSchedule(context.Background(), f, "Summarize today's incidents."); err != nil {
						t.Fatal(err)
					}
				} else if _, err := te.RunHook(context.Background(), name, h, input("hello there"), "hello there"); err != nil {
					t.Fatalf("%s: %v", h, err)
				}
			}
			if s := te.Scripts(); s[0].Failures != 0 {
				t.Errorf("%s failed: %s", name, s[0].LastError)
			}
		})
	}
}

// TestHooksDocDigest: the on_schedule example of docs/hooks.md drops a
// firing on a day without incidents and adds the count to the prompt on
// a day with some.
func TestHooksDocDigest(t *testing.T) {
	var src string
	for _, b := range docLuaBlocks(t) {
		if b.name == "50_digest.lua" {
			src = b.src
		}
	}
	if src == "" {
		t.Fatal("docs/hooks.md has no 50_digest.lua block")
	}
	te := startEngine(t, map[string]string{"50_digest.lua": src}, nil)
	f := core.Firing{ScheduleID: 2, At: time.Unix(1777626000, 0), Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}, Creator: "U1"}
	ctx := context.Background()
	r, err := te.OnSchedule(ctx, f, "Post the incident digest.")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Skip || r.Reason != "no incidents" {
		t.Errorf("no incidents: %+v, want the firing skipped with reason %q", r, "no incidents")
	}
	if err := te.kv.LuaKVSet(ctx, "50_digest", "incidents_today", "3"); err != nil {
		t.Fatal(err)
	}
	r, err = te.OnSchedule(ctx, f, "Post the incident digest.")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Post the incident digest. There were 3 incidents."; r.Skip || r.Prompt != want {
		t.Errorf("3 incidents: %+v, want prompt %q", r, want)
	}
}
