package lua

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// string.sub and string.byte work on bytes, so a hook that cuts user text
// ("héllo":sub(1, 2)) or builds a NUL byte hands back text no store can
// hold; what a hook returns is made valid UTF-8 without NUL bytes before
// it goes on.
func TestHookTextIsStorable(t *testing.T) {
	te := startEngine(t, map[string]string{"cut.lua": `
function pre_hook(ctx)
  ctx.metadata.head = ctx.message:sub(1, 2) .. "\0"
  ctx.message = ctx.message:sub(1, 2) .. string.char(0) .. "!"
  return ctx
end
function post_hook(ctx)
  ctx.message = ctx.message:sub(1, 2)
  return ctx
end
`}, nil)
	res := te.pre(t, "héllo")
	if !storable(res.Text) {
		t.Errorf("pre_hook text = %q; not valid UTF-8 without NUL", res.Text)
	}
	if v := res.Metadata["head"]; !storable(v) {
		t.Errorf("pre_hook metadata head = %q; not valid UTF-8 without NUL", v)
	}
	if got := te.post(t, input("q"), "wörld"); !storable(got) {
		t.Errorf("post_hook answer = %q; not valid UTF-8", got)
	}
}

// on_schedule's reply is posted and stored, and its message becomes the
// firing's prompt: both are cleaned as a hook's text is.
func TestScheduleTextIsStorable(t *testing.T) {
	te := startEngine(t, map[string]string{"digest.lua": `
function on_schedule(ctx)
  if ctx.message == "reply" then return { reply = ("é"):sub(1, 1) .. "\0digest" } end
  ctx.message = ctx.message:sub(1, 1) .. string.char(0) .. ("ü"):sub(1, 1)
  return ctx
end
`}, nil)
	f := core.Firing{ScheduleID: 1, At: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC), Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}}
	for _, prompt := range []string{"reply", "ünd"} {
		r, err := te.OnSchedule(context.Background(), f, prompt)
		if err != nil {
			t.Fatal(err)
		}
		if !storable(r.Text) || !storable(r.Prompt) {
			t.Errorf("on_schedule(%q) = text %q, prompt %q; not valid UTF-8 without NUL", prompt, r.Text, r.Prompt)
		}
	}
}

func storable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}

// A drop's reason is logged and stored with the request: it is cleaned as
// a hook's text is (PostgreSQL's TEXT refuses a NUL byte and invalid
// UTF-8), and cut as an error is.
func TestDropReasonIsStorable(t *testing.T) {
	te := startEngine(t, map[string]string{
		"nul.lua":   `function filter(ctx) return { drop = true, reason = "bad\0word " .. ("é"):sub(1, 1) } end`,
		"huge.lua":  `function filter(ctx) return { drop = true, reason = string.rep("x", 1000000) } end`,
		"sched.lua": `function on_schedule(ctx) return { drop = true, reason = "quiet\0day" } end`,
		"guard.lua": `function filter(ctx) error("bad\0" .. ("é"):sub(1, 1)) end`,
	}, nil)
	// A filter that fails closed stops the message with its error as the
	// reason.
	if res := te.pre(t, "x"); !res.Drop || !storable(res.Reason) || !strings.Contains(res.Reason, "guard.lua:1: bad") {
		t.Errorf("a failing guard: drop %v, reason %q; want the message stopped with a storable reason naming the line", res.Drop, res.Reason)
	}
	for _, file := range []string{"nul.lua", "huge.lua"} {
		res, err := te.RunHook(context.Background(), file, HookFilter, input("x"), "x")
		if err != nil || !res.Drop || !storable(res.Reason) || len(res.Reason) > maxLogMsg+64 {
			t.Errorf("%s: drop %v, reason of %d bytes %.40q, %v; want a storable reason of at most about %d bytes", file, res.Drop, len(res.Reason), res.Reason, err, maxLogMsg)
		}
	}
	f := core.Firing{ScheduleID: 1, At: time.Now(), Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}}
	if r, err := te.OnSchedule(context.Background(), f, "p"); err != nil || !r.Skip || !storable(r.Reason) {
		t.Errorf("on_schedule drop = %+v, %v; want a storable reason", r, err)
	}
}

// A message with no words (a photo without a caption) goes through a
// hook that leaves it as it is; a hook that takes every word away from
// one that had some fails, blank or empty alike.
func TestEmptyMessageThroughAHook(t *testing.T) {
	te := startEngine(t, map[string]string{"hooks.lua": `
function pre_hook(ctx)
  if ctx.message == "blank me" then ctx.message = "  \n " end
  return ctx
end
function post_hook(ctx)
  if ctx.message == "blank me" then ctx.message = "\t" end
  return ctx
end
`}, nil)
	for _, text := range []string{"", " "} {
		if res := te.pre(t, text); res.Text != text || res.Drop {
			t.Errorf("pre_hook on %q = %+v; want the message as it came", text, res)
		}
		if got := te.post(t, input("q"), text); got != text {
			t.Errorf("post_hook on the answer %q = %q; want it as it came", text, got)
		}
	}
	if strings.Contains(te.logs.String(), "lua hook failed") {
		t.Fatalf("a hook that changed nothing failed:\n%s", te.logs.String())
	}
	if res := te.pre(t, "blank me"); res.Text != "blank me" {
		t.Errorf("pre_hook that blanked the message = %+v; want it failed and the message as it came", res)
	}
	if !strings.Contains(te.logs.String(), "pre_hook returned an empty message") {
		t.Errorf("a pre_hook that blanked the message did not fail:\n%s", te.logs.String())
	}
}
