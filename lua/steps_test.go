package lua

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
)

func TestOrder(t *testing.T) {
	for file, want := range map[string]int{"20_classify.lua": 20, "007x.lua": 7, "filter.lua": 0, "_1.lua": 0, "99999999999999999999_big.lua": 0} {
		if got := Order(file); got != want {
			t.Errorf("Order(%q) = %d; want %d", file, got, want)
		}
	}
}

// pluginSteps is a HookSource standing for a gRPC hook plugin.
type pluginSteps []core.HookStep

func (p pluginSteps) HookSteps() []core.HookStep { return p }

func TestLuaStepsInterleaveWithPluginHooks(t *testing.T) {
	te := startEngine(t, map[string]string{
		"10_tag.lua": `function pre_hook(ctx) ctx.message = ctx.message .. " +lua10"; ctx.metadata.first = "lua" return ctx end
		                function post_hook(ctx) ctx.metadata.post10 = "L" return ctx end`,
		"30_tag.lua": `function pre_hook(ctx) ctx.message = ctx.message .. " +lua30" return ctx end
		                function post_hook(ctx) ctx.message = ctx.message .. " +post30 " .. tostring(ctx.metadata.post10) .. " " .. tostring(ctx.metadata.grpcpost) return ctx end`,
		"plain.lua":   `function filter(ctx) if ctx.message:find("spam") then return { drop = true, reason = "spam" } end end`,
		"nohooks.lua": `x = 1`,
	}, func(o *Options) { o.DropNotice = "dropped" })
	steps := te.HookSteps()
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "lua:plain.lua lua:10_tag.lua lua:30_tag.lua" {
		t.Fatalf("steps = %s; want by order (no number = 0), scripts without hooks left out", got)
	}
	if &te.HookSteps()[0] != &steps[0] {
		t.Fatal("HookSteps built the steps again for the same scripts")
	}
	grpc := pluginSteps{{Name: "plugin:x", Order: 20,
		Pre: func(_ context.Context, in core.HookInput) (core.PreResult, error) {
			return core.PreResult{Text: in.Text + " +grpc20", Metadata: map[string]string{"first": in.Metadata["first"], "grpc": "yes"}}, nil
		},
		Post: func(_ context.Context, in core.HookInput, a string) (core.PostResult, error) {
			md := map[string]string{"grpcpost": "yes"}
			for k, v := range in.Metadata {
				md[k] = v
			}
			return core.PostResult{Text: a + " +grpcpost(" + in.Metadata["post10"] + ")", Metadata: md}, nil
		}}}
	h := gateway.NewOrderedHooks(nil, te.Engine, grpc)
	pre, err := h.Pre(context.Background(), input("hi"))
	if err != nil || pre.Text != "hi +lua10 +grpc20 +lua30" || pre.Metadata["first"] != "lua" || pre.Metadata["grpc"] != "yes" {
		t.Fatalf("pre = %+v %v", pre, err)
	}
	post, err := h.Post(context.Background(), core.HookInput{Text: pre.Text, Metadata: pre.Metadata}, "ans")
	// Each post step sees the metadata the steps before it left.
	if err != nil || post != "ans +grpcpost(L) +post30 L yes" {
		t.Fatalf("post = %q %v", post, err)
	}
	if pre, _ := h.Pre(context.Background(), input("spam!")); !pre.Drop || pre.Reply != "dropped" || pre.Reason != "spam" {
		t.Fatalf("filter drop through the steps = %+v", pre)
	}
	// A reload makes new steps.
	writeScript(t, te.dir, "40_more.lua", `function post_hook(ctx) return ctx end`)
	te.reload(context.Background())
	if n := len(te.HookSteps()); n != 4 {
		t.Fatalf("%d steps after adding a script; want 4", n)
	}
}

func TestOnSchedule(t *testing.T) {
	te := startEngine(t, map[string]string{
		"10_digest.lua": `function on_schedule(ctx)
			if ctx.message == "" then return { reply = "plugin firing " .. ctx.schedule .. " in " .. ctx.channel .. ":" .. ctx.chat } end
			if ctx.message:find("quiet") then return { drop = true, reason = "nothing new" } end
			if ctx.message:find("static") then return { reply = "static digest at " .. ctx.at } end
			ctx.message = ctx.message .. " (only open ones)"
			return ctx
		end`,
		"20_more.lua": `function on_schedule(ctx) ctx.message = ctx.message .. ", briefly" end`,
		"30_pre.lua":  `function pre_hook(ctx) return ctx end`,
	}, nil)
	if !te.HasSchedule() {
		t.Fatal("HasSchedule = false")
	}
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	f := core.Firing{ScheduleID: 4, At: at, Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}, Creator: "U1"}
	ctx := context.Background()
	run := func(prompt string) core.FiringResult {
		t.Helper()
		r, err := te.OnSchedule(ctx, f, prompt)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := run("summarize incidents"); r.Prompt != "summarize incidents (only open ones), briefly" || r.Skip || r.Text != "" {
		t.Fatalf("rewrite = %+v", r)
	}
	if r := run("quiet please"); !r.Skip || r.Reason != "nothing new" {
		t.Fatalf("drop = %+v", r)
	}
	if r := run("static"); r.Text != "static digest at 1777626000" {
		t.Fatalf("reply = %+v", r)
	}
	if r := run(""); r.Text != "plugin firing 4 in slack:C1" {
		t.Fatalf("plugin firing = %+v", r)
	}
	// on_schedule is no hook step.
	for _, s := range te.HookSteps() {
		if s.Name != "lua:30_pre.lua" {
			t.Errorf("step %s; on_schedule-only scripts are no hook steps", s.Name)
		}
	}
}

type recorder struct {
	mu  sync.Mutex
	got []core.OpsEvent
}

func (r *recorder) Emit(e core.OpsEvent) { r.mu.Lock(); r.got = append(r.got, e); r.mu.Unlock() }

func TestFailedHookIsAnOperatorEvent(t *testing.T) {
	rec := &recorder{}
	te := startEngine(t, map[string]string{"bad.lua": `function pre_hook(ctx) error("boom") end`}, func(o *Options) { o.Events = rec })
	for range maxFailures {
		te.pre(t, "x")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != maxFailures || rec.got[2].Kind != core.EventLuaHookFailed || rec.got[2].Subject != "bad.lua" ||
		!strings.Contains(rec.got[2].Message, "boom") || rec.got[2].Details["consecutive_failures"] != "3" || rec.got[2].Details["fail_closed"] != "false" {
		t.Fatalf("events = %+v; want one lua_hook_failed per failure for bad.lua", rec.got)
	}
}

// hookCounter is a core.Observer that counts HookFailed by channel and stage.
type hookCounter struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *hookCounter) Accepted(string)                               {}
func (c *hookCounter) Stage(string, core.Stage, time.Duration)       {}
func (c *hookCounter) Finished(string, core.EventKind, core.Outcome) {}
func (c *hookCounter) HookFailed(channel string, s core.Stage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[string]int{}
	}
	c.got[channel+"/"+string(s)]++
}

// TestFailedRunsAreCountedByStage: a failed run of a filter, a pre_hook
// or a post_hook is a HookFailed of its stage (the metric
// opentalon_hook_failures_total, whose help names Lua scripts), whether
// the script fails open or closed, through the hook steps the gateway
// runs (which return no error for it, so the chain counted nothing).
func TestFailedRunsAreCountedByStage(t *testing.T) {
	obs := &hookCounter{}
	te := startEngine(t, map[string]string{
		"10_guard.lua": `function filter(ctx) if ctx.message:find("boom") then error("guard down") end end`,
		"20_open.lua":  `function pre_hook(ctx) if ctx.message:find("bang") then error("x") end return ctx end`,
		"30_post.lua":  `function post_hook(ctx) if ctx.message:find("boom") then error("y") end return ctx end`,
	}, func(o *Options) { o.Observer = obs })
	for _, st := range te.HookSteps() {
		if st.Pre != nil {
			st.Pre(context.Background(), input("boom bang"))
		}
		if st.Post != nil {
			st.Post(context.Background(), input("q"), "boom")
		}
	}
	te.pre(t, "fine")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := map[string]int{"console/pre_hooks": 2, "console/post_hooks": 1}; !maps.Equal(obs.got, want) {
		t.Fatalf("HookFailed = %v, want %v", obs.got, want)
	}
}
