package lua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"

	"github.com/opentalon/opentalon/core"
	glua "github.com/yuin/gopher-lua"
)

// Limits of what a hook hands back.
const (
	maxMetaEntries = 256
	maxMetaBytes   = 64 << 10
)

// vm is one Lua state of a script's pool with its sandbox. One run at a
// time uses it.
type vm struct {
	L *glua.LState
	// envMT is the metatable of each run's environment: reads fall back
	// to the sandbox's globals, writes stay in the environment.
	envMT *glua.LTable
	// libs are the read-only library proxies.
	libs   []*glua.LTable
	format glua.LGFunction
	// maxString bounds the strings the library functions build.
	maxString int

	fnLog, fnKVGet, fnKVSet, fnLLM *glua.LFunction
	// cur is the run in progress.
	cur *run
}

func (e *Engine) newVM() *vm {
	v := &vm{maxString: e.o.MemoryMB << 20 / 4}
	v.newSandbox()
	e.states.Add(1)
	return v
}

func (v *vm) close() { v.L.Close() }

// run is one hook invocation.
type run struct {
	e    *Engine
	s    *script
	hook string
	in   core.HookInput
	log  *slog.Logger
	// ctx is the run's context, also the state's.
	ctx      context.Context
	ctxTable *glua.LTable
	llmCalls int
	// watch holds the run's limits; they pause while ctx.llm waits.
	watch *watch
	// reserved is what the sandbox's functions built since the last look
	// at the heap (reserve).
	reserved int
	// tails counts the run's tail calls (tailCheck).
	tails int
}

// logger is the run's logger, under the script's and the hook's name.
func (r *run) logger() *slog.Logger {
	if r.log == nil {
		r.log = r.e.log.With("script", r.s.file, "hook", r.hook)
	}
	return r.log
}

// outcome is what a hook run decided.
type outcome struct {
	message  string
	metadata map[string]string
	drop     bool
	reason   string
	// reply is on_schedule's text to post instead.
	reply string
}

// invoke runs one hook of s with the limits: a fresh environment over the
// compiled chunk, a ctx table, the execution timeout and the memory
// watch. The state goes back to the pool only after a clean run.
func (e *Engine) invoke(ctx context.Context, s *script, hook string, in core.HookInput, text string, md map[string]string) (outcome, error) {
	v := s.get(e)
	r := &run{e: e, s: s, hook: hook, in: in}
	var out outcome
	err := e.limited(ctx, v, r, func() error {
		var err error
		out, err = v.call(r, text, md)
		return err
	})
	if err != nil || !v.clean() {
		v.close()
	} else {
		s.put(v)
	}
	if errors.Is(err, ErrMemory) {
		// What the stopped run allocated is garbage now (its state is
		// closed), but until the collector frees it, it is part of the
		// heap the next run's limit is set against (watchdog.setLimit):
		// freed while that run ran, it would be room for that run, and a
		// bomb sent again and again could grow the process by another
		// budget or two each time. Collected here, it is not.
		runtime.GC()
	}
	return out, err
}

// limited runs fn on v under r with the execution timeout and the memory
// watch; a run stopped by either fails with ErrTimeout or ErrMemory.
func (e *Engine) limited(ctx context.Context, v *vm, r *run, fn func() error) error {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.ctx = rctx
	r.watch = e.dog.add(e.o.Timeout, cancel)
	v.L.SetContext(&runCtx{Context: rctx, check: r.checkMemory})
	v.cur = r
	err := fn()
	e.dog.remove(r.watch)
	v.cur = nil
	v.L.RemoveContext()
	v.L.SetTop(0)
	if err == nil {
		return nil
	}
	switch context.Cause(rctx) {
	case ErrTimeout:
		return fmt.Errorf("%w: ran longer than %s (plugins.lua.limits.timeout_seconds)", ErrTimeout, e.o.Timeout)
	case ErrMemory:
		return fmt.Errorf("%w: the heap grew by more than %d MiB while it ran (plugins.lua.limits.memory_mb)", ErrMemory, e.o.MemoryMB)
	}
	return fmt.Errorf("%s", luaMessage(err))
}

// runChunk runs the script's top level in a fresh environment and
// returns that environment.
func (v *vm) runChunk(s *script) (*glua.LTable, error) {
	L := v.L
	env := L.CreateTable(0, 4)
	env.Metatable = v.envMT
	env.RawSetString("_G", env)
	fn := L.NewFunctionFromProto(s.proto)
	fn.Env = env
	L.Push(fn)
	if err := L.PCall(0, 0, nil); err != nil {
		return nil, err
	}
	return env, nil
}

// call runs r's hook with a ctx of text and md, and reads its result.
func (v *vm) call(r *run, text string, md map[string]string) (outcome, error) {
	env, err := v.runChunk(r.s)
	if err != nil {
		return outcome{}, err
	}
	hf, ok := env.RawGetString(r.hook).(*glua.LFunction)
	if !ok {
		return outcome{}, fmt.Errorf("%s no longer defines %s", r.s.file, r.hook)
	}
	L := v.L
	ct := v.newCtx(r, text, md)
	L.Push(hf)
	L.Push(ct)
	if err := L.PCall(1, 1, nil); err != nil {
		return outcome{}, err
	}
	ret := L.Get(-1)
	L.Pop(1)
	return readResult(r, ret, ct, text)
}

// newCtx builds the ctx table of one run.
func (v *vm) newCtx(r *run, text string, md map[string]string) *glua.LTable {
	L := v.L
	ct := L.CreateTable(0, 10)
	ct.RawSetString("message", glua.LString(text))
	ct.RawSetString("session_id", glua.LNumber(r.in.Session.ID))
	mt := L.CreateTable(0, len(md))
	for k, val := range md {
		mt.RawSetString(k, glua.LString(val))
	}
	ct.RawSetString("metadata", mt)
	ct.RawSetString("channel", glua.LString(r.in.In.Conversation.Channel))
	ct.RawSetString("user", glua.LString(r.in.In.UserID))
	ct.RawSetString("log", v.fnLog)
	ct.RawSetString("kv_get", v.fnKVGet)
	ct.RawSetString("kv_set", v.fnKVSet)
	ct.RawSetString("llm", v.fnLLM)
	if r.hook == HookSchedule {
		c := r.in.In.Conversation
		ct.RawSetString("chat", glua.LString(c.Chat))
		ct.RawSetString("thread", glua.LString(c.Thread))
		id, _ := strconv.ParseInt(r.in.In.Meta["schedule"], 10, 64)
		at, _ := strconv.ParseInt(r.in.In.Meta["at"], 10, 64)
		ct.RawSetString("schedule", glua.LNumber(id))
		ct.RawSetString("at", glua.LNumber(at))
	}
	r.ctxTable = ct
	return ct
}

// readResult reads a hook's return value: a filter's verdict table, or
// the (possibly changed) ctx of a pre_hook or post_hook. A hook that
// returns nothing leaves its ctx as the result; channel, user and
// session_id are read-only (changes to them are not read back). text is
// the message (or answer) the hook was given.
func readResult(r *run, ret glua.LValue, ct *glua.LTable, text string) (outcome, error) {
	t := ct
	switch x := ret.(type) {
	case *glua.LTable:
		t = x
	case *glua.LNilType:
		if r.hook == HookFilter {
			return outcome{}, nil
		}
	default:
		if r.hook == HookFilter {
			return outcome{}, fmt.Errorf("filter returned a %s; return { drop = true, reason = \"...\" } to drop the message, or { drop = false }", ret.Type())
		}
		return outcome{}, fmt.Errorf("%s returned a %s; return ctx", r.hook, ret.Type())
	}
	if r.hook == HookSchedule {
		return readSchedule(t)
	}
	var out outcome
	if glua.LVAsBool(t.RawGetString("drop")) {
		if r.hook == HookPost {
			return outcome{}, fmt.Errorf("post_hook cannot drop an answer; change ctx.message instead")
		}
		out.drop = true
		if reason, ok := toString(t.RawGetString("reason")); ok {
			// It is logged and stored with the request (PostgreSQL's
			// TEXT refuses a NUL byte and invalid UTF-8).
			out.reason = cutText(core.CleanText(reason))
		}
		if out.reason == "" {
			out.reason = "by " + r.s.file
		}
		return out, nil
	}
	if r.hook == HookFilter {
		return outcome{}, nil
	}
	raw, ok := toString(t.RawGetString("message"))
	// Lua strings are bytes: a cut such as ("é"):sub(1, 1) or a "\0" would
	// reach the model, the store and the platform as it is.
	msg := core.CleanText(raw)
	if !ok {
		return outcome{}, fmt.Errorf("%s returned a ctx whose message is a %s; it must be a string", r.hook, t.RawGetString("message").Type())
	}
	if strings.TrimSpace(msg) == "" && strings.TrimSpace(text) != "" {
		// A hook that took every word away (a message with only a
		// photo has none to take: it goes on as it came).
		return outcome{}, fmt.Errorf("%s returned an empty message; to stop a message, return { drop = true, reason = \"...\" } from filter", r.hook)
	}
	out.message = msg
	md, err := readMeta(t.RawGetString("metadata"))
	if err != nil {
		return outcome{}, fmt.Errorf("%s: %w", r.hook, err)
	}
	out.metadata = md
	return out, nil
}

// readSchedule reads on_schedule's result: a drop, a reply, or the
// (possibly empty) message.
func readSchedule(t *glua.LTable) (outcome, error) {
	var out outcome
	if glua.LVAsBool(t.RawGetString("drop")) {
		out.drop = true
		reason, _ := toString(t.RawGetString("reason"))
		out.reason = cutText(core.CleanText(reason)) // as a hook's (readResult)
		if out.reason == "" {
			out.reason = "by on_schedule"
		}
		return out, nil
	}
	if v := t.RawGetString("reply"); v != glua.LNil {
		reply, ok := toString(v)
		if !ok {
			return outcome{}, fmt.Errorf("on_schedule returned a reply that is a %s; it must be a string", v.Type())
		}
		out.reply = core.CleanText(reply) // as a hook's text (readResult)
	}
	if v := t.RawGetString("message"); v != glua.LNil {
		msg, ok := toString(v)
		if !ok {
			return outcome{}, fmt.Errorf("on_schedule returned a ctx whose message is a %s; it must be a string", v.Type())
		}
		out.message = core.CleanText(msg)
	}
	return out, nil
}

// readMeta turns ctx.metadata back into strings.
func readMeta(v glua.LValue) (map[string]string, error) {
	out := map[string]string{}
	if v == glua.LNil {
		return out, nil
	}
	t, ok := v.(*glua.LTable)
	if !ok {
		return nil, fmt.Errorf("ctx.metadata is a %s; it must be a table of strings", v.Type())
	}
	size := 0
	var err error
	t.ForEach(func(k, val glua.LValue) {
		if err != nil {
			return
		}
		ks, ok1 := toString(k)
		vs, ok2 := toString(val)
		if b, isBool := val.(glua.LBool); isBool {
			vs, ok2 = b.String(), true
		}
		switch {
		case !ok1:
			err = fmt.Errorf("ctx.metadata has a %s key; keys must be strings", k.Type())
		case !ok2:
			err = fmt.Errorf("ctx.metadata[%q] is a %s; values must be strings", ks, val.Type())
		case len(out) >= maxMetaEntries:
			err = fmt.Errorf("ctx.metadata has more than %d entries", maxMetaEntries)
		}
		size += len(ks) + len(vs)
		if err == nil && size > maxMetaBytes {
			err = fmt.Errorf("ctx.metadata holds more than %d bytes", maxMetaBytes)
		}
		out[core.CleanText(ks)] = core.CleanText(vs)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// toString converts a string or a number.
func toString(v glua.LValue) (string, bool) {
	switch x := v.(type) {
	case glua.LString:
		return string(x), true
	case glua.LNumber:
		return x.String(), true
	}
	return "", false
}
