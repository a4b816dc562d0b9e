package lua

import (
	"context"

	glua "github.com/yuin/gopher-lua"
)

// The memory limit at the allocation sites the sandbox controls. The
// watchdog's ticker alone looks at the heap once a tick, when the Go
// scheduler runs it: a script allocating fast on a busy machine grew the
// process by gigabytes before it looked. So a run also checks its memory
// itself, synchronously:
//
//   - every instrCheckEvery instructions (gopher-lua calls its context's Done
//     before each instruction: runCtx counts them), which bounds what
//     tables, closures and the like can add between two looks;
//   - before the sandbox's own functions build a string (concatenation,
//     string.rep, format, gsub, upper, lower, reverse, table.concat):
//     reserve, which refuses an allocation that would cross the limit
//     before it is made.
//
// Every other allocation of one instruction is small or bounded (a table's
// array part by maxArrayIndex, the data stack by registryMaxSize).

// instrCheckEvery is how many instructions run between two synchronous looks
// at the heap (one look costs about a microsecond).
const instrCheckEvery = 1024

// reserveQuantum is how many bytes the sandbox's functions may build
// between two looks; a larger one is looked at before it is built.
const reserveQuantum = 64 << 10

// runCtx is a run's context as its Lua state sees it: every instrCheckEvery-th
// call of Done checks the run's memory. Only the run's goroutine calls it
// (ctx functions hand the run's plain context to anything else).
type runCtx struct {
	context.Context
	n     int
	check func()
}

func (c *runCtx) Done() <-chan struct{} {
	if c.n++; c.n >= instrCheckEvery {
		c.n = 0
		c.check()
	}
	return c.Context.Done()
}

// checkMemory stops r's run when the heap is past its limit.
func (r *run) checkMemory() {
	if r.watch != nil && r.e.dog.over(r.watch, 0) {
		r.watch.stop(ErrMemory)
	}
}

// reserve is called before a function of the sandbox builds n bytes: when
// they would take the heap past the run's limit, the run is stopped and
// the call fails before anything is allocated.
func (v *vm) reserve(L *glua.LState, n int) {
	r := v.cur
	if r == nil || r.watch == nil {
		return
	}
	r.reserved += n
	if r.reserved < reserveQuantum {
		return
	}
	r.reserved = 0
	if r.e.dog.over(r.watch, uint64(n)) {
		r.watch.stop(ErrMemory)
		L.RaiseError("%d more bytes would cross the memory limit (plugins.lua.limits.memory_mb)", n)
	}
}

// reserving wraps a string function whose result is as long as its first
// argument (string.upper, lower, reverse).
func (v *vm) reserving(fn glua.LGFunction) glua.LGFunction {
	return func(L *glua.LState) int {
		v.reserve(L, len(L.CheckString(1)))
		return fn(L)
	}
}
