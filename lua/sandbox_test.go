package lua

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// probeScript runs attempt inside pcall and reports in ctx.message
// whether it got through.
func probeScript(attempt string) string {
	return fmt.Sprintf(`function pre_hook(ctx)
  local ok, res = pcall(function() %s end)
  if ok then ctx.message = "ESCAPED: " .. tostring(res) else ctx.message = "blocked: " .. tostring(res) end
  return ctx
end
`, attempt)
}

func TestEscapeAttemptsFail(t *testing.T) {
	attempts := map[string]string{
		"io_open":          `return io.open("/etc/passwd"):read("*a")`,
		"os_execute":       `return os.execute("id")`,
		"os_getenv":        `return os.getenv("HOME")`,
		"os_exit":          `return os.exit(1)`,
		"require":          `return require("os")`,
		"load":             `return load("return 1")()`,
		"loadstring":       `return loadstring("return 1")()`,
		"dofile":           `return dofile("/etc/passwd")`,
		"loadfile":         `return loadfile("/etc/passwd")`,
		"string_dump":      `return string.dump(pre_hook)`,
		"method_dump":      `return ("x").dump(pre_hook)`,
		"debug_getinfo":    `return debug.getinfo(1).source`,
		"debug_registry":   `return debug.getregistry()`,
		"package_loaded":   `return package.loaded.os.execute("id")`,
		"collectgarbage":   `return collectgarbage("count")`,
		"getfenv":          `return getfenv(0).os`,
		"setfenv":          `return setfenv(1, {})`,
		"rawset":           `return rawset(string, "dump", 1)`,
		"module":           `return module("x")`,
		"coroutine":        `return coroutine.create(print)`,
		"newproxy":         `return newproxy(true)`,
		"randomseed":       `return math.randomseed(1)`,
		"string_mt_index":  `return getmetatable("").__index.dump(pre_hook)`,
		"string_mt_find":   `return getmetatable("").__index.find("a", "a")`,
		"string_mt_set":    `return setmetatable(getmetatable(""), {})`,
		"lib_write":        `string.rep = function() return "mine" end return string.rep("x", 2)`,
		"lib_mt":           `return setmetatable(string, {__index = {dump = print}})`,
		"lib_mt_index":     `return getmetatable(string).__index.dump`,
		"globals_mt":       `return getmetatable(_G).__index.io`,
		"function_mt":      `return setmetatable(print, {__index = {x = 1}})`,
		"number_mt":        `return setmetatable(1, {__index = {x = 1}})`,
		"via_G":            `return _G.io.open("/etc/passwd")`,
		"os_via_index":     `return os["execute"]("id")`,
		"gopher_channel":   `return channel.make()`,
		"string_gfind_old": `return string.gfind("a", "a")()`,
	}
	scripts := map[string]string{}
	for name, a := range attempts {
		scripts[name+".lua"] = probeScript(a)
	}
	te := startEngine(t, scripts, nil)
	for name := range attempts {
		res, err := te.RunHook(context.Background(), name+".lua", HookPre, input("hi"), "hi")
		if err != nil {
			t.Errorf("%s: the hook failed outside pcall: %v", name, err)
			continue
		}
		if !strings.HasPrefix(res.Message, "blocked: ") {
			t.Errorf("%s: %s", name, res.Message)
		}
	}
}

// What a script legitimately sees of its sandbox.
func TestSandboxOffers(t *testing.T) {
	te := startEngine(t, map[string]string{"offers.lua": `
function pre_hook(ctx)
  local parts = {
    type(string.find), type(string.gsub), type(("x").upper), type(table.concat), type(table.sort),
    type(math.floor), tostring(math.pi > 3), type(os.time()), type(os.date), type(io), type(getmetatable("")),
    type(pcall), type(unpack), type(select), _VERSION, tostring(_G == _G._G),
  }
  ctx.message = table.concat(parts, ",")
  return ctx
end`}, nil)
	res := te.pre(t, "x")
	want := "function,function,function,function,function,function,true,number,nil,nil,string,function,function,function,Lua 5.1,true"
	if res.Text != want {
		t.Fatalf("sandbox = %s\nwant       %s", res.Text, want)
	}
}

// print and ctx.log reach slog under the script's name; ctx's functions
// also work when called with a colon.
func TestPrintAndColonCalls(t *testing.T) {
	te := startEngine(t, map[string]string{"talk.lua": `
print("loading", 1)
function pre_hook(ctx)
  print("hello", 42)
  ctx:log("warn", "careful")
  ctx:kv_set("k", "v")
  ctx.metadata.k = ctx:kv_get("k")
  return ctx
end`}, nil)
	res := te.pre(t, "x")
	logs := te.logs.String()
	for _, want := range []string{`level=INFO msg="loading\t1" component=lua script=talk.lua hook=load`, `msg="hello\t42" component=lua script=talk.lua hook=pre_hook`, `level=WARN msg=careful component=lua script=talk.lua`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if res.Metadata["k"] != "v" {
		t.Errorf("metadata = %v, want k=v through ctx:kv_get", res.Metadata)
	}
}

// print joins only what the log keeps: print(s, s, …) of strings at the
// string limit built gigabytes in one Go call, past memory_mb.
func TestPrintIsBounded(t *testing.T) {
	te := startEngine(t, map[string]string{"loud.lua": `
function pre_hook(ctx)
  local s = string.rep("x", 4 * 1024 * 1024 - 1)
  local t = {}
  for i = 1, 100 do t[i] = s end
  print(unpack(t))
  print("short", 1, nil)
  return ctx
end`}, func(o *Options) { o.MemoryMB = 16; o.Timeout = time.Minute })
	runtime.GC()
	var err error
	alloc := allocatedBy(func() { _, err = te.runErr(t, "loud.lua", "x") })
	if alloc > 64<<20 {
		t.Fatalf("print allocated %d MB (%v); want what the log keeps", alloc>>20, err)
	}
	if err != nil {
		t.Fatalf("loud.lua: %v", err)
	}
	logs := te.logs.String()
	if !strings.Contains(logs, "…(truncated)") || !strings.Contains(logs, `msg="short\t1\tnil"`) {
		t.Fatalf("log lacks the cut line or the short one:\n%.300s", logs)
	}
}
