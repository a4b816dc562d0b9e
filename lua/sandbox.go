package lua

import (
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// The sandbox: a state opened with SkipOpenLibs and only the whitelisted
// functions below. Scripts see the libraries through read-only proxy
// tables whose metatables are protected (getmetatable answers a string,
// setmetatable refuses), and the string metatable is protected the same
// way, so getmetatable("").__index reaches nothing.

// State sizes: 200 nested calls (Lua's own C-call limit), a data stack
// that starts at 1024 slots and may grow in steps of 4096 up to 64K slots
// (about 1 MiB), so a large table constructor or unpack does not crawl
// while an unbounded one fails with "registry overflow".
const (
	callStackSize    = 200
	registrySize     = 1024
	registryGrowStep = 4096
	registryMaxSize  = 64 * 1024
)

// Whitelisted functions of each library; everything else (io, os but
// os.time, debug, package, coroutine, require, load, loadstring, dofile,
// loadfile, string.dump, collectgarbage, getfenv/setfenv, rawset,
// math.randomseed, module, newproxy) is not there.
var (
	baseNames   = []string{"assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget", "select", "tonumber", "tostring", "type", "unpack", "xpcall"}
	stringNames = []string{"byte", "char", "len", "lower", "reverse", "sub", "upper"}
	tableNames  = []string{"insert", "maxn", "remove", "sort"}
	mathNames   = []string{"abs", "acos", "asin", "atan", "atan2", "ceil", "cos", "cosh", "deg", "exp", "floor", "fmod", "frexp", "ldexp", "log", "log10", "max", "min", "mod", "modf", "pi", "huge", "pow", "rad", "random", "sin", "sinh", "sqrt", "tan", "tanh"}
)

// protectedMarker is what getmetatable returns for a protected table.
const protectedMarker = "protected"

// openLib runs one of gopher-lua's library openers and returns its table.
func openLib(L *glua.LState, open glua.LGFunction) *glua.LTable {
	L.Push(L.NewFunction(open))
	L.Call(0, 1)
	t := L.Get(-1).(*glua.LTable)
	L.Pop(1)
	return t
}

// pick copies the named fields of from into a new table.
func pick(L *glua.LState, from *glua.LTable, names []string) *glua.LTable {
	t := L.NewTable()
	for _, n := range names {
		if v := from.RawGetString(n); v != glua.LNil {
			t.RawSetString(n, v)
		}
	}
	return t
}

// readOnly returns an empty proxy table that reads from lib and refuses
// writes; its metatable is protected.
func readOnly(L *glua.LState, name string, lib *glua.LTable) *glua.LTable {
	mt := L.NewTable()
	mt.RawSetString("__index", lib)
	mt.RawSetString("__newindex", L.NewFunction(func(L *glua.LState) int {
		L.RaiseError("the %s library is read-only", name)
		return 0
	}))
	mt.RawSetString("__metatable", glua.LString(protectedMarker))
	p := L.NewTable()
	p.Metatable = mt
	return p
}

// newSandbox builds v's state: the whitelisted libraries, the protected
// string metatable, the base table behind every run's environment and the
// ctx functions.
func (v *vm) newSandbox() {
	L := glua.NewState(glua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    callStackSize,
		RegistrySize:     registrySize,
		RegistryMaxSize:  registryMaxSize,
		RegistryGrowStep: registryGrowStep,
	})
	v.L = L
	baseLib := openLib(L, glua.OpenBase)
	strLib := openLib(L, glua.OpenString)
	tabLib := openLib(L, glua.OpenTable)
	mathLib := openLib(L, glua.OpenMath)
	osLib := openLib(L, glua.OpenOs)
	// OpenBase's table is the globals table itself: pick from it before
	// the globals and the registered modules are wiped.
	base := pick(L, baseLib, baseNames)
	origSetMT := baseLib.RawGetString("setmetatable").(*glua.LFunction).GFunction
	for _, t := range []*glua.LTable{L.G.Global, L.G.Registry} {
		var keys []glua.LValue
		t.ForEach(func(k, _ glua.LValue) { keys = append(keys, k) })
		for _, k := range keys {
			t.RawSet(k, glua.LNil)
		}
	}
	v.format = strLib.RawGetString("format").(*glua.LFunction).GFunction

	str := pick(L, strLib, stringNames)
	for name, fn := range map[string]glua.LGFunction{
		"find": strFind, "match": strMatch, "gmatch": strGmatch,
		"gsub": v.strGsub, "rep": v.strRep, "format": v.strFormat,
	} {
		str.RawSetString(name, L.NewFunction(fn))
	}
	for _, name := range []string{"lower", "upper", "reverse"} {
		str.RawSetString(name, L.NewFunction(v.reserving(strLib.RawGetString(name).(*glua.LFunction).GFunction)))
	}
	tab := pick(L, tabLib, tableNames)
	tab.RawSetString("concat", L.NewFunction(v.tableConcat))
	os := L.NewTable()
	os.RawSetString("time", osLib.RawGetString("time"))

	// Method calls on strings ("x":upper()) find the same functions.
	smt := L.NewTable()
	smt.RawSetString("__index", str)
	smt.RawSetString("__metatable", glua.LString(protectedMarker))
	L.SetMetatable(glua.LString(""), smt)

	base.RawSetString("_VERSION", glua.LString(glua.LuaVersion))
	base.RawSetString("setmetatable", L.NewFunction(setMetatable(origSetMT)))
	base.RawSetString("print", L.NewFunction(v.print))
	base.RawSetString(concatName, L.NewFunction(v.concat))
	v.libs = v.libs[:0]
	for name, lib := range map[string]*glua.LTable{"string": str, "table": tab, "math": pick(L, mathLib, mathNames), "os": os} {
		p := readOnly(L, name, lib)
		v.libs = append(v.libs, p)
		base.RawSetString(name, p)
	}
	v.envMT = L.NewTable()
	v.envMT.RawSetString("__index", base)
	v.envMT.RawSetString("__metatable", glua.LString(protectedMarker))

	v.fnLog = L.NewFunction(v.ctxLog)
	v.fnKVGet = L.NewFunction(v.ctxKVGet)
	v.fnKVSet = L.NewFunction(v.ctxKVSet)
	v.fnLLM = L.NewFunction(v.ctxLLM)
}

// setMetatable is setmetatable for tables only: a script must not give
// strings, numbers or functions a metatable, which the state would keep
// for every later run.
func setMetatable(orig glua.LGFunction) glua.LGFunction {
	return func(L *glua.LState) int {
		L.CheckTable(1)
		return orig(L)
	}
}

// clean reports whether the run left the state as it found it: the
// library proxies are still empty (table.insert or rawget-free tricks
// could otherwise park values there for the next conversation).
func (v *vm) clean() bool {
	for _, p := range v.libs {
		if k, _ := p.Next(glua.LNil); k != glua.LNil {
			return false
		}
	}
	return v.L.GetTop() == 0
}

// print logs its arguments at info under the script's name. It joins
// only what the log keeps (maxLogMsg): joined whole, print(s, s, …) of
// strings at the string limit built gigabytes in one Go call.
func (v *vm) print(L *glua.LState) int {
	var b strings.Builder
	for i := 1; i <= L.GetTop() && b.Len() <= maxLogMsg; i++ {
		if i > 1 {
			b.WriteByte('\t')
		}
		s := L.ToStringMeta(L.Get(i)).String()
		if room := maxLogMsg + 1 - b.Len(); len(s) > room {
			s = s[:max(room, 0)] // one byte past: logf marks the cut
		}
		b.WriteString(s)
	}
	v.logf(L, "info", b.String())
	return 0
}

// maxArrayIndex bounds the array part of a Lua table: gopher-lua fills
// the gap up to an integer key with nils, so with its default (64M)
// t[60000000] = 1 alone allocates about a gigabyte in one instruction,
// before any limit can look. Keys from here on go to the hash part.
const maxArrayIndex = 1 << 20

// gopher-lua reads MaxArrayIndex, its process-wide table tuning knob,
// from every state; it is set once, before any state exists.
func init() { glua.MaxArrayIndex = maxArrayIndex }
