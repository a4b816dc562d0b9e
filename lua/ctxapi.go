package lua

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
	glua "github.com/yuin/gopher-lua"
)

// The functions of ctx: log, kv_get, kv_set and llm. They are made once
// per state and find the run in progress in vm.cur. Each accepts being
// called with a colon too (ctx:log(...)).

// Limits of the KV and the log.
const (
	maxKVKey   = 1 << 10
	maxKVValue = 64 << 10
	maxLogMsg  = 8 << 10
)

// KV is the per-script key-value store behind ctx.kv_get and ctx.kv_set;
// script is the script's name, bound by the engine. store.DB implements
// it in SQLite.
//
// LuaKVPut refuses, wrapping core.ErrLuaKVQuota, a write that would take
// the namespace past q (0 = no bound).
type KV interface {
	LuaKVGet(ctx context.Context, script, key string) (value string, found bool, err error)
	LuaKVPut(ctx context.Context, script, key, value string, q core.PluginStateQuota) error
	LuaKVDelete(ctx context.Context, script, key string) error
}

// args drops a leading ctx (a call with a colon) and returns the index of
// the first real argument.
func (v *vm) args(L *glua.LState) int {
	if v.cur != nil && L.Get(1) == v.cur.ctxTable {
		return 2
	}
	return 1
}

func (v *vm) ctxLog(L *glua.LState) int {
	a := v.args(L)
	level := L.OptString(a, "info")
	msg := L.ToStringMeta(L.Get(a + 1)).String()
	v.logf(L, level, msg)
	return 0
}

// logf logs msg at level under the script's name.
func (v *vm) logf(L *glua.LState, level, msg string) {
	if v.cur == nil {
		return
	}
	if len(msg) > maxLogMsg {
		msg = msg[:maxLogMsg] + "…(truncated)"
	}
	lv := slog.LevelInfo
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	v.cur.logger().Log(v.cur.ctx, lv, msg)
}

func (v *vm) kv(L *glua.LState, fn string) (KV, string) {
	r := v.cur
	if r == nil || r.e.o.KV == nil {
		L.RaiseError("ctx.%s: no key-value store is available", fn)
	}
	key := L.CheckString(v.args(L))
	if key == "" || len(key) > maxKVKey {
		L.RaiseError("ctx.%s: a key must have 1 to %d bytes", fn, maxKVKey)
	}
	// PostgreSQL's TEXT refuses these and SQLite stores them: refused on
	// both, a script behaves the same on either engine.
	if strings.IndexByte(key, 0) >= 0 || !utf8.ValidString(key) {
		L.RaiseError("ctx.%s: a key must be UTF-8 text without a NUL byte (values take any bytes)", fn)
	}
	return r.e.o.KV, key
}

func (v *vm) ctxKVGet(L *glua.LState) int {
	kv, key := v.kv(L, "kv_get")
	val, ok, err := kv.LuaKVGet(v.cur.ctx, v.cur.s.name, key)
	if err != nil {
		L.RaiseError("ctx.kv_get: %v", err)
	}
	if !ok {
		L.Push(glua.LNil)
		return 1
	}
	L.Push(glua.LString(val))
	return 1
}

func (v *vm) ctxKVSet(L *glua.LState) int {
	kv, key := v.kv(L, "kv_set")
	val := L.Get(v.args(L) + 1)
	var err error
	if val == glua.LNil {
		err = kv.LuaKVDelete(v.cur.ctx, v.cur.s.name, key)
	} else {
		s, ok := toString(val)
		if !ok {
			L.RaiseError("ctx.kv_set: the value is a %s; store a string or a number (nil deletes the key)", val.Type())
		}
		if len(s) > maxKVValue {
			L.RaiseError("ctx.kv_set: the value has %d bytes; at most %d are stored", len(s), maxKVValue)
		}
		err = kv.LuaKVPut(v.cur.ctx, v.cur.s.name, key, s, v.cur.e.o.KVQuota)
	}
	if err != nil {
		L.RaiseError("ctx.kv_set: %v", err)
	}
	return 0
}

// ctxLLM is ctx.llm(prompt, model): one call through the Generator, by
// catalog alias (default plugins.lua.default_model), at most
// llm_max_calls per hook run, each within llm_timeout_seconds. The
// answer comes back trimmed of surrounding white space.
func (v *vm) ctxLLM(L *glua.LState) int {
	r := v.cur
	if r == nil {
		L.RaiseError("ctx.llm is only available inside a hook")
	}
	a := v.args(L)
	prompt := L.CheckString(a)
	model := L.OptString(a+1, r.e.o.DefaultModel)
	o := r.e.o
	if o.Generator == nil {
		L.RaiseError("ctx.llm: no LLM is available to Lua hooks here")
	}
	r.llmCalls++
	if r.llmCalls > o.LLMMaxCalls {
		L.RaiseError("ctx.llm: call %d of this %s run is over the limit of %d (plugins.lua.limits.llm_max_calls)", r.llmCalls, r.hook, o.LLMMaxCalls)
	}
	r.e.dog.pause(r.watch)
	lctx, cancel := context.WithTimeout(r.ctx, o.LLMTimeout)
	g, err := o.Generator.Generate(lctx, core.GenerateRequest{
		Messages:     []core.ChatMessage{{Role: core.RoleUser, Content: prompt}},
		Model:        model,
		Purpose:      "lua",
		Conversation: r.in.In.Conversation,
		SessionID:    r.in.Session.ID,
		UserID:       r.in.In.UserID,
	})
	timedOut := errors.Is(lctx.Err(), context.DeadlineExceeded) && r.ctx.Err() == nil
	cancel()
	r.e.dog.resume(r.watch)
	if err != nil {
		if timedOut {
			L.RaiseError("ctx.llm: no answer within %s (plugins.lua.limits.llm_timeout_seconds)", o.LLMTimeout)
		}
		L.RaiseError("ctx.llm: %v", err)
	}
	L.Push(glua.LString(strings.TrimSpace(g.Text)))
	return 1
}
