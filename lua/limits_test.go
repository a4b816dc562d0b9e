package lua

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// runErr runs pre_hook of the only script on text and returns its error.
func (te *testEngine) runErr(t testing.TB, file, text string) (Result, error) {
	t.Helper()
	return te.RunHook(context.Background(), file, HookPre, input(text), text)
}

func TestTimeoutStopsALoop(t *testing.T) {
	te := startEngine(t, map[string]string{
		"loop.lua":       `function pre_hook(ctx) while true do end end`,
		"pcall_loop.lua": `function pre_hook(ctx) while true do pcall(function() while true do end end) end end`,
		// Tail calls without end, below the bound on pending ones
		// (TestTailCallsAreBounded): a deeper recursion may reach
		// that bound before the timeout on a fast machine.
		"tail.lua": `local function f(n) if n % 1000 == 0 then return n end return f(n + 1) end
function pre_hook(ctx) local n = 1 while true do n = f(n) + 1 end end`,
	}, func(o *Options) { o.Timeout = 200 * time.Millisecond })
	for _, f := range []string{"loop.lua", "pcall_loop.lua", "tail.lua"} {
		if _, err := te.runErr(t, f, "x"); !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "plugins.lua.limits.timeout_seconds") {
			t.Errorf("%s: err = %v, want the execution time limit", f, err)
		}
	}
	// Through Pre the message goes on unchanged, and the failure is logged.
	if res := te.pre(t, "still here"); res.Text != "still here" || res.Drop {
		t.Fatalf("Pre = %+v, want the message unchanged", res)
	}
	if !strings.Contains(te.logs.String(), "lua hook failed; the message goes on without its change") {
		t.Errorf("failure not logged:\n%s", te.logs.String())
	}
}

func TestInfiniteRecursionStops(t *testing.T) {
	te := startEngine(t, map[string]string{
		"rec.lua": `local function f(n) return 1 + f(n + 1) end function pre_hook(ctx) f(1) return ctx end`,
	}, nil)
	if _, err := te.runErr(t, "rec.lua", "x"); err == nil || !strings.Contains(err.Error(), "stack overflow") {
		t.Fatalf("err = %v, want a stack overflow", err)
	}
}

func TestMemoryBombsStop(t *testing.T) {
	bombs := map[string]string{
		"table_bomb.lua":  `function pre_hook(ctx) local t = {} local i = 0 while true do i = i + 1 t[i] = {i, i} end end`,
		"rep_bomb.lua":    `function pre_hook(ctx) local t = {} for i = 1, 1e9 do t[i] = string.rep(tostring(i), 100000) end end`,
		"concat_bomb.lua": `function pre_hook(ctx) local t = {} local s = string.rep("y", 1000000) while true do t[#t+1] = s .. #t end end`,
	}
	te := startEngine(t, bombs, func(o *Options) {
		o.MemoryMB = 8
		o.Timeout = time.Minute // the memory limit must be what stops them
	})
	for f := range bombs {
		if _, err := te.runErr(t, f, "x"); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "plugins.lua.limits.memory_mb") {
			t.Errorf("%s: err = %v, want the memory limit", f, err)
		}
	}
}

// A large integer key does not make gopher-lua fill the gap with nils
// (a gigabyte in one instruction at its default array bound).
func TestSparseKeyDoesNotAllocateTheGap(t *testing.T) {
	te := startEngine(t, map[string]string{
		"sparse.lua": `function pre_hook(ctx)
  local t = {}
  t[60000000] = "far"
  table.insert(t, 50000000, "further")
  ctx.message = t[60000000] .. "," .. t[50000000] .. "," .. #t
  return ctx
end`,
	}, func(o *Options) { o.MemoryMB = 16 })
	if res, err := te.runErr(t, "sparse.lua", "x"); err != nil || res.Message != "far,further,0" {
		t.Fatalf("sparse keys = %q, %v", res.Message, err)
	}
}

// One library call cannot build a string past the limit (a quarter of
// memory_mb: 4 MiB here).
func TestStringBuildersAreBounded(t *testing.T) {
	te := startEngine(t, map[string]string{
		"rep.lua":         `function pre_hook(ctx) ctx.message = string.rep("x", 5 * 1024 * 1024) return ctx end`,
		"rep_ok.lua":      `function pre_hook(ctx) ctx.message = tostring(#string.rep("ab", 1024 * 1024)) return ctx end`,
		"gsub_repl.lua":   `function pre_hook(ctx) ctx.message = string.rep("x", 1000):gsub("x", string.rep("y", 100000)) return ctx end`,
		"gsub_plain.lua":  `function pre_hook(ctx) ctx.message = string.rep("x", 1000):gsub("xx", string.rep("y", 100000)) return ctx end`,
		"gsub_fn.lua":     `function pre_hook(ctx) local big = string.rep("z", 1000000) ctx.message = string.rep("x", 10):gsub("x", function() return big end) return ctx end`,
		"gsub_table.lua":  `function pre_hook(ctx) local big = {x = string.rep("z", 1000000)} ctx.message = string.rep("x", 10):gsub("%a", big) return ctx end`,
		"concat.lua":      `function pre_hook(ctx) local t = {} for i = 1, 10 do t[i] = string.rep("z", 1000000) end ctx.message = table.concat(t) return ctx end`,
		"format.lua":      `function pre_hook(ctx) ctx.message = string.format("%999d", 1) return ctx end`,
		"format_big.lua":  `function pre_hook(ctx) local s = string.rep("z", 3000000) ctx.message = string.format("%s%s", s, s) return ctx end`,
		"format_ok.lua":   `function pre_hook(ctx) ctx.message = string.format("%5.2f|%-4s|%d|%q", 3.14159, "ab", 42, "q") return ctx end`,
		"registry.lua":    `function pre_hook(ctx) local t = {} for i = 1, 200000 do t[i] = i end ctx.message = tostring(select("#", unpack(t))) return ctx end`,
		"byte_spread.lua": `function pre_hook(ctx) local s = string.rep("a", 1000000) ctx.message = tostring(select("#", s:byte(1, -1))) return ctx end`,
	}, func(o *Options) {
		o.MemoryMB = 16
		// The registry scripts loop over many values: slow under -race on
		// a loaded machine, and no time limit is under test here.
		o.Timeout = time.Minute
	})
	for _, tc := range []struct{ file, want string }{
		{"rep.lua", "string.rep: 5242880 copies of 1 bytes exceed the string limit of 4194304 bytes (plugins.lua.limits.memory_mb)"},
		{"gsub_repl.lua", "string.gsub: the result would be longer than 4194304 bytes"},
		{"gsub_plain.lua", "string.gsub: the result would be longer than 4194304 bytes"},
		{"gsub_fn.lua", "string.gsub: the result would be longer than 4194304 bytes"},
		{"gsub_table.lua", "string.gsub: the result would be longer than 4194304 bytes"},
		{"concat.lua", "table.concat: the result would be longer than the string limit of 4194304 bytes"},
		{"format.lua", "invalid format (width or precision too long)"},
		{"format_big.lua", "string.format: the result could be longer than the string limit"},
		{"registry.lua", "registry overflow"},
		{"byte_spread.lua", "registry overflow"},
	} {
		if _, err := te.runErr(t, tc.file, "x"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.file, err, tc.want)
		}
	}
	for file, want := range map[string]string{"rep_ok.lua": "2097152", "format_ok.lua": ` 3.14|ab  |42|"q"`} {
		if res, err := te.runErr(t, file, "x"); err != nil || res.Message != want {
			t.Errorf("%s = %q, %v; want %q", file, res.Message, err, want)
		}
	}
}

// The concatenation operator is the bounded one (concat.go): it joins as
// the VM would — numbers, metamethods from the right, one value of a call
// or of ... —, reports errors on the line of the expression, refuses a
// result past the string limit, and no script can reach or replace it.
func TestConcatenation(t *testing.T) {
	te := startEngine(t, map[string]string{"cat.lua": `
local mt = {__concat = function(a, b)
  local l = type(a) == "table" and a.name or a
  local r = type(b) == "table" and b.name or b
  return "<" .. l .. "+" .. r .. ">"
end}
local function two() return "x", "y" end
local function va(...) return "[" .. ... .. "]" end
function pre_hook(ctx)
  local obj = setmetatable({name = "o"}, mt)
  local wide = "a"
  for i = 1, 40 do wide = wide .. "b" .. "c" .. "d" .. "e" .. "f" .. "g" .. "h" .. "i" .. "j" .. "k" .. "l" .. "m" .. "n" .. "o" .. "p" .. "q" .. "r" end
  ctx.message = table.concat({
    1 .. 2, 1.5 .. "", "a" .. obj .. "b", obj .. obj, two() .. "!", va("p", "q"), #wide,
    tostring(rawget(_G, "(concat)")), tostring(pcall(function() return nil .. "x" end)),
  }, " ")
  return ctx
end`,
		"line.lua":   "function pre_hook(ctx)\n  local a = 'x'\n\n  return a .. {}\nend\n",
		"big.lua":    `function pre_hook(ctx) local s = string.rep("x", 1024 * 1024) return s .. s .. s .. s .. s end`,
		"shadow.lua": `local cat = function() return "hijacked" end _G["(concat)"] = cat function pre_hook(ctx) ctx.message = "a" .. "b" return ctx end`,
	}, func(o *Options) { o.MemoryMB = 16 })
	res, err := te.runErr(t, "cat.lua", "x")
	if want := "12 1.5 a<o+b> <o+o> x! [p] 681 nil false"; err != nil || res.Message != want {
		t.Fatalf("cat.lua = %q, %v; want %q", res.Message, err, want)
	}
	if _, err := te.runErr(t, "line.lua", "x"); err == nil || !strings.Contains(err.Error(), "line.lua:4:") || !strings.Contains(err.Error(), "cannot perform concat operation between string and table") {
		t.Fatalf("line.lua: %v; want the error on line 4", err)
	}
	if _, err := te.runErr(t, "big.lua", "x"); err == nil || !strings.Contains(err.Error(), "a concatenation of 5242880 bytes exceeds the string limit of 4194304 bytes") {
		t.Fatalf("big.lua: %v; want the string limit", err)
	}
	if res, err := te.runErr(t, "shadow.lua", "x"); err != nil || res.Message != "ab" {
		t.Fatalf("shadow.lua = %q, %v; want the real concatenation", res.Message, err)
	}
}

// The pattern functions recurse on the pattern only: megabytes of input
// neither overflow the Go stack (a fatal error no recover catches) nor
// hold the goroutine past the timeout.
func TestPatternFunctionsOnMegabytes(t *testing.T) {
	const mb = 2 << 20
	big := strings.Repeat("a", mb) + "b"
	te := startEngine(t, map[string]string{
		"find.lua": `function pre_hook(ctx)
  local s, e = string.find(ctx.message, "a*b")
  local m = ctx.message:match("^(a*)b$")
  local s2 = string.find(ctx.message, "(a+)(b)")
  local m2 = ctx.message:match(".-b")
  local m3 = ctx.message:match("%f[%a]%a+%f[%A]")
  local n = 0
  for w in ctx.message:gmatch("a+") do n = n + #w end
  local g, count = ctx.message:gsub("a+", "c")
  local g2, count2 = ctx.message:gsub("(a)(a)", "%2%1")
  ctx.message = table.concat({s, e, #m, s2, #m2, #m3, n, g, count, #g2, count2}, ",")
  return ctx
end`,
		"balance.lua": `function pre_hook(ctx) local s, e = ctx.message:find("%b()") ctx.message = tostring(e) return ctx end`,
	}, func(o *Options) { o.Timeout = time.Minute })
	res, err := te.runErr(t, "find.lua", big)
	want := fmt.Sprintf("1,%d,%d,1,%d,%d,%d,cb,1,%d,%d", mb+1, mb, mb+1, mb+1, mb, mb+1, mb/2)
	if err != nil || res.Message != want {
		t.Fatalf("find.lua on %d bytes = %.200q, %v; want %q", len(big), res.Message, err, want)
	}
	nested := strings.Repeat("(", mb/2) + strings.Repeat(")", mb/2)
	if res, err := te.runErr(t, "balance.lua", nested); err != nil || res.Message != fmt.Sprint(mb) {
		t.Fatalf("%%b on %d bytes = %q, %v", len(nested), res.Message, err)
	}
	hard := startEngine(t, map[string]string{
		"exponential.lua": `function pre_hook(ctx)
  return { message = tostring(string.find(string.rep("a", 40), "a*a*a*a*a*a*a*a*a*a*a*a*a*c")) }
end`,
		"quadratic.lua": `function pre_hook(ctx) return { message = tostring(ctx.message:find("(.-)x$")) } end`,
		"deep.lua":      `function pre_hook(ctx) return { message = tostring(ctx.message:find(string.rep("a?", 300) .. "b")) } end`,
		"captures.lua":  `function pre_hook(ctx) return { message = tostring(ctx.message:find(string.rep("(a)", 40))) } end`,
	}, func(o *Options) { o.Timeout = 500 * time.Millisecond })
	for _, f := range []string{"exponential.lua", "quadratic.lua"} {
		if _, err := hard.runErr(t, f, big); !errors.Is(err, ErrTimeout) {
			t.Errorf("%s: err = %v, want the timeout to stop the match", f, err)
		}
	}
	if _, err := hard.runErr(t, "deep.lua", big); err == nil || !strings.Contains(err.Error(), "pattern too complex") {
		t.Errorf("300 optional items: err = %v, want pattern too complex", err)
	}
	if _, err := hard.runErr(t, "captures.lua", big); err == nil || !strings.Contains(err.Error(), "too many captures") {
		t.Errorf("40 captures: err = %v, want too many captures", err)
	}
}

func TestLLMLimits(t *testing.T) {
	te := startEngine(t, map[string]string{
		"three.lua": `function pre_hook(ctx) for i = 1, 3 do ctx.message = ctx.llm("p" .. i) end return ctx end`,
		"four.lua":  `function pre_hook(ctx) for i = 1, 4 do ctx.message = ctx.llm("p" .. i, "big") end return ctx end`,
		"slow.lua":  `function pre_hook(ctx) ctx.message = ctx.llm("slow") return ctx end`,
	}, func(o *Options) {
		o.LLMTimeout = 300 * time.Millisecond
		o.Timeout = 300 * time.Millisecond
	})
	te.llm.answer = func(p string) string { return "re:" + p }
	if res, err := te.runErr(t, "three.lua", "x"); err != nil || res.Message != "re:p3" {
		t.Fatalf("three calls = %q, %v", res.Message, err)
	}
	before := len(te.llm.requests())
	_, err := te.runErr(t, "four.lua", "x")
	if err == nil || !strings.Contains(err.Error(), "ctx.llm: call 4 of this pre_hook run is over the limit of 3 (plugins.lua.limits.llm_max_calls)") {
		t.Fatalf("fourth call: err = %v", err)
	}
	reqs := te.llm.requests()[before:]
	if len(reqs) != 3 || reqs[0].Model != "big" {
		t.Fatalf("the LLM saw %d calls (%+v), want 3 with model big", len(reqs), reqs)
	}
	// The limit is per hook run: the next run may call again.
	if _, err := te.runErr(t, "three.lua", "x"); err != nil {
		t.Fatalf("the next run: %v", err)
	}

	te.llm.mu.Lock()
	te.llm.delay = 5 * time.Second
	te.llm.mu.Unlock()
	if _, err := te.runErr(t, "slow.lua", "x"); err == nil || !strings.Contains(err.Error(), "ctx.llm: no answer within 300ms (plugins.lua.limits.llm_timeout_seconds)") {
		t.Fatalf("slow LLM: err = %v", err)
	}
}

// Waiting for ctx.llm does not count against the execution timeout.
func TestLLMWaitIsNotExecutionTime(t *testing.T) {
	te := startEngine(t, map[string]string{
		"wait.lua": `function pre_hook(ctx) ctx.message = ctx.llm("a") .. ctx.llm("b") return ctx end`,
	}, func(o *Options) {
		o.Timeout = 300 * time.Millisecond
		o.LLMTimeout = 5 * time.Second
	})
	te.llm.answer = func(p string) string { return p }
	te.llm.delay = 400 * time.Millisecond
	if res, err := te.runErr(t, "wait.lua", "x"); err != nil || res.Message != "ab" {
		t.Fatalf("two slow LLM calls = %q, %v; want ab within the execution limit", res.Message, err)
	}
}

// A script that fails for some messages keeps running for the others:
// no run of one user's message disables it for everyone. The status page
// sees the failures in a row.
func TestFailuresDoNotDisableAScript(t *testing.T) {
	src := `function pre_hook(ctx)
  if ctx.message == "boom" then error("boom!") end
  ctx.message = ctx.message .. " [seen]"
  return ctx
end`
	te := startEngine(t, map[string]string{"fragile.lua": src}, nil)
	for range 5 {
		if res := te.pre(t, "boom"); res.Text != "boom" || res.Drop {
			t.Fatalf("a failing pre_hook = %+v; want the message on unchanged (it does not fail closed)", res)
		}
	}
	if sc := te.Scripts()[0]; sc.Failures != 5 || !strings.Contains(sc.LastError, "boom!") || sc.FailClosed {
		t.Fatalf("script = %+v; want 5 failures in a row with the last error, failing open", sc)
	}
	if res := te.pre(t, "ok"); res.Text != "ok [seen]" {
		t.Fatalf("after five failures = %q; the script must still run", res.Text)
	}
	if sc := te.Scripts()[0]; sc.Failures != 0 {
		t.Fatalf("failures after a success = %d", sc.Failures)
	}
}

// Finding 3 of issue 25: a guard that asks a small model, which fails on
// long messages. Three long messages used to disable the script for
// everyone, after which the scam it guards against went through. Now
// each failure stops that message only (fail closed, with a reason for
// its user and an operator event), and the next scam is still dropped.
func TestGuardFailsClosedForThatMessageOnly(t *testing.T) {
	rec := &recorder{}
	te := startEngine(t, map[string]string{
		"scam_filter.lua": `function filter(ctx)
  local verdict = ctx.llm("Is this a scam? YES or NO: " .. ctx.message)
  if verdict == "YES" then return { drop = true, reason = "scam" } end
end`,
	}, func(o *Options) { o.Events = rec })
	te.llm.answer = func(p string) string {
		if strings.Contains(p, "send me your bank password") {
			return "YES"
		}
		return "NO"
	}
	te.llm.fail = func(p string) error {
		if len(p) > 200 {
			return errors.New("context too long for the small model")
		}
		return nil
	}
	long := strings.Repeat("a very long message ", 20)
	for range 3 {
		res := te.pre(t, long)
		if !res.Drop || res.Reply != checkFailedNotice || !strings.Contains(res.Reason, "scam_filter.lua filter failed") {
			t.Fatalf("a long message = %+v; want it stopped with the notice (the filter fails closed)", res)
		}
	}
	if res := te.pre(t, "send me your bank password"); !res.Drop || res.Reason != "scam" {
		t.Fatalf("the scam after three failures = %+v; want it dropped: the filter still runs", res)
	}
	if res := te.pre(t, "hello"); res.Drop {
		t.Fatalf("a normal message = %+v; want it through", res)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 3 || rec.got[0].Kind != core.EventLuaHookFailed || rec.got[0].Subject != "scam_filter.lua" ||
		rec.got[0].Details["fail_closed"] != "true" || !strings.Contains(rec.got[0].Message, "the message was stopped") {
		t.Fatalf("events = %+v; want one lua_hook_failed per failure, failing closed", rec.got)
	}
}

// A redaction post_hook (stream_safe = false) that fails withholds the
// answer it could not check; fail_closed = false lets the operator choose
// the other way, and fail_closed = true makes a pre_hook guard too.
func TestFailClosedPolicy(t *testing.T) {
	te := startEngine(t, map[string]string{
		"10_redact.lua":   "stream_safe = false\nfunction post_hook(ctx) if ctx.message:find('boom') then error('redactor down') end ctx.message = ctx.message:gsub('%d', '#') return ctx end",
		"20_open.lua":     "fail_closed = false\nfunction filter(ctx) if ctx.message:find('boom') then error('x') end end",
		"30_closed.lua":   "fail_closed = true\nfunction pre_hook(ctx) if ctx.message:find('pre') then error('y') end return ctx end",
		"40_enriches.lua": "function post_hook(ctx) if ctx.message:find('boom') then error('z') end ctx.message = ctx.message .. '.' return ctx end",
	}, nil)
	in := input("q")
	if got := te.post(t, in, "call 555"); got != "call ###." {
		t.Fatalf("post = %q", got)
	}
	if got := te.post(t, in, "boom 555"); got != answerFailedNotice {
		t.Fatalf("post with the redactor failing = %q; want the answer withheld", got)
	}
	if res := te.pre(t, "boom"); res.Drop {
		t.Fatalf("a filter with fail_closed = false = %+v; want the message through", res)
	}
	if res := te.pre(t, "pre"); !res.Drop || res.Reply != checkFailedNotice {
		t.Fatalf("a pre_hook with fail_closed = true = %+v; want the message stopped", res)
	}
	// Through the hook steps (the gateway's path) alike.
	for _, st := range te.HookSteps() {
		if st.Name == "lua:10_redact.lua" {
			if got, err := st.Post(context.Background(), in, "boom 1"); err != nil || got.Text != answerFailedNotice {
				t.Fatalf("step post = %q, %v; want the answer withheld", got, err)
			}
		}
	}
	for _, sc := range te.Scripts() {
		want := sc.Name == "10_redact" || sc.Name == "30_closed"
		if sc.FailClosed != want {
			t.Errorf("%s: FailClosed = %v, want %v", sc.Name, sc.FailClosed, want)
		}
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A script stuck in a loop holds only its own run: other runs, of other
// scripts and of its own, go on meanwhile.
func TestOthersRunWhileOneLoops(t *testing.T) {
	te := startEngine(t, map[string]string{
		"a_loop.lua": `function pre_hook(ctx) if ctx.message == "loop" then while true do end end ctx.metadata.a = "1" return ctx end`,
		"b_tag.lua":  `function pre_hook(ctx) ctx.message = ctx.message .. " [b]" return ctx end`,
	}, func(o *Options) { o.Timeout = 1500 * time.Millisecond })
	done := make(chan core.PreResult, 1)
	go func() {
		res, _ := te.Pre(context.Background(), input("loop"))
		done <- res
	}()
	for i := range 20 {
		res := te.pre(t, "msg")
		if res.Text != "msg [b]" || res.Metadata["a"] != "1" {
			t.Fatalf("message %d while another loops = %+v", i, res)
		}
	}
	select {
	case <-done:
		t.Fatal("the loop ended before the other messages were answered; the test proves nothing")
	default:
	}
	if res := <-done; res.Text != "loop [b]" {
		t.Fatalf("the looping message = %+v, want it to go on to the next script", res)
	}
}

// memory_mb bounds what a script can allocate whatever its allocation
// pattern, and however late the watchdog's ticker is: here it ticks every
// 200 ms (a starved goroutine on a loaded machine; bombs of a held-out
// corpus grew the process to 1.2 GB and 540 MB), so only the run's own
// checks can stop them in time; with the ticker alone the table_concat
// bomb allocated 1.3 GB, and the llm_pause one was never stopped. Each bomb must fail that one hook call with the
// memory limit (or, for a string, the string limit) having allocated at
// most a few budgets, and the next call must work.
func TestMemoryLimitHoldsWhateverThePattern(t *testing.T) {
	const budgetMB = 16
	bombs := map[string]string{
		"tables.lua":        `function pre_hook(ctx) local t = {} local i = 0 while true do i = i + 1 t[i] = {i, i} end end`,
		"tail_tables.lua":   `local function grow(n, acc) return grow(n + 1, {acc, n, {}}) end function pre_hook(ctx) return grow(1, {}) end`,
		"closures.lua":      `function pre_hook(ctx) local t = {} local i = 0 while true do i = i + 1 local j = i t[i] = function() return j end end end`,
		"tail_closures.lua": `local function grow(n, acc) return grow(n + 1, function() return acc, n end) end function pre_hook(ctx) return grow(1, nil) end`,
		"hash.lua":          `function pre_hook(ctx) local t = {} local i = 0 while true do i = i + 1 t["k" .. i] = i end end`,
		"doubling.lua":      `function pre_hook(ctx) local s = "x" while true do s = s .. s end end`,
		"concat.lua":        `function pre_hook(ctx) local t = {} local s = string.rep("y", 1000000) while true do t[#t+1] = s .. #t end end`,
		"rep.lua":           `function pre_hook(ctx) local t = {} for i = 1, 1e9 do t[i] = string.rep(tostring(i % 10), 1000000) end end`,
		"table_concat.lua":  `function pre_hook(ctx) local t, parts = {}, {} for i = 1, 100 do parts[i] = string.rep("z", 10000) end while true do t[#t+1] = table.concat(parts) end end`,
		"upper.lua":         `function pre_hook(ctx) local s = string.rep("a", 1000000) local t = {} while true do t[#t+1] = s:upper() end end`,
		"gsub.lua":          `function pre_hook(ctx) local s = string.rep("a", 100000) local t = {} while true do t[#t+1] = s:gsub("a", "bb") end end`,
		"coroutines.lua":    `function pre_hook(ctx) local cos = {} while true do local co = coroutine.create(function() local t = {} while true do t[#t+1] = {} end end) cos[#cos+1] = co coroutine.resume(co) end end`,
		// Between its ctx.llm calls the script's memory stays counted.
		"llm_pause.lua": `function pre_hook(ctx) local t = {} for round = 1, 4 do for i = 1, 60000 do t[#t+1] = {i} end if round < 4 then ctx.llm("go on") end end return ctx end`,
	}
	te := startEngine(t, map[string]string{"ok.lua": `function pre_hook(ctx) ctx.message = ctx.message .. "!" return ctx end`}, func(o *Options) {
		o.MemoryMB = budgetMB
		o.HeapPoll = 200 * time.Millisecond
		o.Timeout = 20 * time.Second
	})
	for file, src := range bombs {
		writeScript(t, te.dir, file, src)
	}
	te.reload(context.Background())
	for file := range bombs {
		t.Run(file, func(t *testing.T) {
			runtime.GC()
			var err error
			alloc := allocatedBy(func() { _, err = te.runErr(t, file, "x") })
			switch {
			case err == nil:
				t.Fatalf("%s ended without an error; want the memory limit", file)
			case file == "coroutines.lua":
				// There is no coroutine library in the sandbox.
			case file == "doubling.lua":
				if !strings.Contains(err.Error(), "string limit") {
					t.Fatalf("%s: %v; want the string limit", file, err)
				}
			case !errors.Is(err, ErrMemory):
				t.Fatalf("%s: %v; want the memory limit", file, err)
			}
			if alloc > 4*budgetMB<<20 {
				t.Fatalf("%s allocated %d MB before it was stopped; memory_mb is %d", file, alloc>>20, budgetMB)
			}
			if res, err := te.runErr(t, "ok.lua", "fine"); err != nil || res.Message != "fine!" {
				t.Fatalf("after %s: %q, %v; want the next hook call to work", file, res.Message, err)
			}
		})
	}
}

// allocatedBy is the bytes the process allocated while fn ran.
func allocatedBy(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// The memory limit holds for a bomb sent again and again, with no
// collection between the runs (one user repeating one message): a run's
// limit is set against the heap at its start, and that heap held the
// previous bomb's garbage, which the collector freed while the next bomb
// ran, so each bomb could allocate that much more than the last (ten
// table bombs under memory_mb 64 grew the gateway to 1.5 GB).
func TestMemoryLimitHoldsForRepeatedBombs(t *testing.T) {
	const budgetMB = 16
	te := startEngine(t, map[string]string{
		"tail_tables.lua": `local function grow(n, acc) return grow(n + 1, {acc, n, {}}) end function pre_hook(ctx) return grow(1, {}) end`,
		"tables.lua":      `function pre_hook(ctx) local t = {} local i = 0 while true do i = i + 1 t[i] = {i, i} end end`,
		"ok.lua":          `function pre_hook(ctx) ctx.message = ctx.message .. "!" return ctx end`,
	}, func(o *Options) {
		o.MemoryMB = budgetMB
		o.Timeout = 20 * time.Second
	})
	runtime.GC()
	for i := range 8 {
		for _, file := range []string{"tail_tables.lua", "tables.lua"} {
			var err error
			alloc := allocatedBy(func() { _, err = te.runErr(t, file, "x") })
			if !errors.Is(err, ErrMemory) {
				t.Fatalf("run %d of %s: %v; want the memory limit", i+1, file, err)
			}
			if alloc > 4*budgetMB<<20 {
				t.Fatalf("run %d of %s allocated %d MB before it was stopped; memory_mb is %d", i+1, file, alloc>>20, budgetMB)
			}
		}
	}
	if res, err := te.runErr(t, "ok.lua", "fine"); err != nil || res.Message != "fine!" {
		t.Fatalf("after the bombs: %q, %v; want the next hook call to work", res.Message, err)
	}
}

// Tail calls stay tail calls (a tail-recursive loop of 100,000 calls
// works, every value comes back), but the traceback gopher-lua builds
// for an error lists every pending tail call: an error after millions of
// them allocated gigabytes in one Go call, past memory_mb, after the
// timeout too. The pending tail calls are bounded, and so is what an
// error costs.
func TestTailCallsAreBounded(t *testing.T) {
	te := startEngine(t, map[string]string{
		"tails.lua": `
local function two() return "a", "b" end
local function count(n, acc) if n == 0 then return acc end return count(n - 1, acc + 1) end
local obj = {v = "m"}
function obj:get(x) return self.v .. x end
local function method() return obj:get("!") end
local function pass() return two() end
function pre_hook(ctx)
  ctx.message = table.concat({count(100000, 0), select("#", pass()), (select(2, pass())), method()}, " ")
  return ctx
end`,
		"bomb.lua": `
local function f(n) if n == 0 then error("deep") end return f(n - 1) end
function pre_hook(ctx)
  local ok, err = pcall(f, 3000000)
  ctx.message = tostring(err)
  return ctx
end`,
	}, func(o *Options) { o.Timeout = time.Minute; o.MemoryMB = 1024 })
	if res, err := te.runErr(t, "tails.lua", "x"); err != nil || res.Message != "100000 2 b m!" {
		t.Fatalf("tails.lua = %q, %v; want the tail calls to work as in Lua", res.Message, err)
	}
	runtime.GC()
	var res Result
	var err error
	alloc := allocatedBy(func() { res, err = te.runErr(t, "bomb.lua", "x") })
	if alloc > 160<<20 {
		t.Fatalf("bomb.lua allocated %d MB; the traceback of a tail recursion must be bounded", alloc>>20)
	}
	if err != nil || !strings.Contains(res.Message, "tail calls pending") {
		t.Fatalf("bomb.lua = %q, %v; want the tail-call bound", res.Message, err)
	}
}

// An error value that is not a message, or a library function's panic,
// still names the script's line.
func TestErrorValueNamesItsLine(t *testing.T) {
	te := startEngine(t, map[string]string{
		"table.lua": "function pre_hook(ctx)\n  local x = 1\n  error({code = 1})\nend\n",
		"nil.lua":   "local function f()\n  error(nil)\nend\nfunction pre_hook(ctx)\n  f()\nend\n",
		"text.lua":  "function pre_hook(ctx)\n  error(\"boom\")\nend\n",
		"panic.lua": "function pre_hook(ctx)\n  local n = 0\n  return math.random(n)\nend\n",
	}, nil)
	for file, want := range map[string]string{
		"table.lua": "table.lua:3: error() was given a table, not a message (table: 0x",
		"nil.lua":   "nil.lua:2: error() was given a nil, not a message (nil)",
		"text.lua":  "text.lua:2: boom",
		"panic.lua": "panic.lua:3: a library function failed: invalid argument to Intn",
	} {
		if _, err := te.runErr(t, file, "x"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v; want %q…", file, err, want)
		}
	}
}

// A script that raises megabytes does not put them into the log, the
// operator's notification sinks and the status page.
func TestHugeErrorIsCut(t *testing.T) {
	te := startEngine(t, map[string]string{
		"huge.lua": `function pre_hook(ctx) error(string.rep("é", 500000)) end`,
	}, nil)
	_, err := te.runErr(t, "huge.lua", "x")
	if err == nil || len(err.Error()) > maxLogMsg+64 || !strings.HasPrefix(err.Error(), "huge.lua:1: éé") || !utf8.ValidString(err.Error()) {
		n := 0
		if err != nil {
			n = len(err.Error())
		}
		t.Fatalf("error of %d bytes; want it cut to about %d bytes of valid UTF-8, with the line", n, maxLogMsg)
	}
}

// string.format fails as Lua 5.1 does where gopher-lua's format (Go's
// fmt) put "%!s(MISSING)", "%!z(…)" or a 0 into the text: a hook
// author's slip is an error with its line, not garbage sent to the user.
func TestFormatErrorsAsLua51(t *testing.T) {
	cases := map[string]string{
		`string.format("%s and %s", "a")`: "bad argument #3 to 'format' (no value)",
		`string.format("%z", 1)`:          "invalid option '%z'",
		`string.format("%d", "abc")`:      "number expected, got string",
		`string.format("%5.1f", nil)`:     "number expected, got nil",
	}
	scripts := map[string]string{}
	names := map[string]string{}
	i := 0
	for expr := range cases {
		i++
		name := fmt.Sprintf("f%d.lua", i)
		names[expr] = name
		scripts[name] = "function pre_hook(ctx)\n  ctx.message = " + expr + "\n  return ctx\nend\n"
	}
	scripts["ok.lua"] = `function pre_hook(ctx) ctx.message = string.format("%d|%5.1f|%s|%q|%x|%s|%%", "12", 2.25, nil, 7, 255, {}):gsub("0x%x+", "ADDR") return ctx end`
	te := startEngine(t, scripts, nil)
	for expr, want := range cases {
		_, err := te.runErr(t, names[expr], "x")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), names[expr]+":2:") {
			t.Errorf("%s: %v; want an error on line 2 with %q", expr, err, want)
		}
	}
	if res, err := te.runErr(t, "ok.lua", "x"); err != nil || res.Message != `12|  2.2|nil|"7"|ff|table: ADDR|%` {
		t.Errorf("ok.lua = %q, %v", res.Message, err)
	}
}

// The check before a tail call leaves the call as it was: a library
// function called in a tail call keeps its name in its errors, and a
// script at the 200-register or 200-local limit loads as it did without
// the check.
func TestTailCheckKeepsTheCall(t *testing.T) {
	names := make([]string, 199)
	for i := range names {
		names[i] = fmt.Sprintf("a%d", i)
	}
	locals := "local " + strings.Join(names, ", ") + "\n"
	te := startEngine(t, map[string]string{
		"name.lua":   "local function f(s)\n  return string.rep(s)\nend\nfunction pre_hook(ctx)\n  return f(\"x\")\nend\n",
		"top.lua":    locals + "function pre_hook(ctx) return ctx end\n",
		"inner.lua":  "local function g() return \"ok\" end\nlocal function f()\n" + locals + "  return g()\nend\nfunction pre_hook(ctx) ctx.message = f() return ctx end\n",
		"method.lua": "local function f(s)\n  return s:rep()\nend\nfunction pre_hook(ctx)\n  return f(\"x\")\nend\n",
	}, nil)
	for file, want := range map[string]string{
		"name.lua":   "name.lua:2: bad argument #2 to rep (number expected, got nil)",
		"method.lua": "method.lua:2: bad argument #2 to rep (number expected, got nil)",
	} {
		if _, err := te.runErr(t, file, "x"); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %q", file, err, want)
		}
	}
	if res, err := te.runErr(t, "inner.lua", "x"); err != nil || res.Message != "ok" {
		t.Errorf("inner.lua = %q, %v", res.Message, err)
	}
}

// A numeric option takes a numeric string as its number, as in Lua 5.1,
// and %u prints the number: Go's fmt printed "255" for %x as the hex of
// its bytes, and "%!u(…)".
func TestFormatNumericStrings(t *testing.T) {
	te := startEngine(t, map[string]string{
		"num.lua": `function pre_hook(ctx) ctx.message = string.format("%x|%d|%.1f|%c|%u|%5u", "255", "0x10", "1e2", "65", 3, "42") return ctx end`,
	}, nil)
	if res, err := te.runErr(t, "num.lua", "x"); err != nil || res.Message != "ff|16|100.0|A|3|   42" {
		t.Fatalf("num.lua = %q, %v; want ff|16|100.0|A|3|   42", res.Message, err)
	}
}
