package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/lua"
)

// luaOptions maps plugins.lua to the engine's options.
func luaOptions(l config.Lua, gen core.Generator, kv lua.KV, log *slog.Logger) lua.Options {
	return lua.Options{
		Dir:          l.ScriptsDir,
		Watch:        l.Watch,
		DefaultModel: l.DefaultModel,
		DropNotice:   l.DropNotice,
		MemoryMB:     l.Limits.MemoryMB,
		Timeout:      time.Duration(l.Limits.TimeoutSeconds) * time.Second,
		LLMTimeout:   time.Duration(l.Limits.LLMTimeoutSeconds) * time.Second,
		LLMMaxCalls:  l.Limits.LLMMaxCalls,
		Generator:    gen,
		KV:           kv,
		Logger:       log,
	}
}

// buildHooks returns the hooks around every answer: the Lua engine when
// plugins.lua.scripts_dir is set (started here, closed with the app) and
// the hook plugins' hooks when plugins run, interleaved by order (a
// failing one is logged and skipped); then AppOptions.Hooks, whose errors
// fail the request; nil when there are none.
func (a *App) buildHooks(ctx context.Context) (core.Hooks, error) {
	if a.cfg.Plugins.Lua.ScriptsDir != "" {
		o := luaOptions(a.cfg.Plugins.Lua, a.router, a.db, a.log)
		o.Events = a.events()
		eng := lua.New(o)
		if err := eng.Start(ctx); err != nil {
			return nil, err
		}
		a.closers = append(a.closers, eng.Close)
		a.lua = eng
	}
	sources := a.hookSources()
	if len(sources) == 0 {
		return a.opts.Hooks, nil
	}
	ordered := gateway.NewOrderedHooks(a.log, sources...)
	if a.metrics != nil {
		ordered.Observe(a.metrics)
	}
	if a.opts.Hooks == nil {
		return ordered, nil
	}
	return hookChain{ordered, a.opts.Hooks}, nil
}

// hookChain runs several Hooks in order: each pre-hook sees the text and
// metadata the previous one left, and the first drop or direct answer
// ends the chain; each post-hook sees the previous one's answer. An
// error ends the chain. It is stream-safe when every hook of it is.
type hookChain []core.Hooks

// StreamSafe implements core.StreamSafety.
func (c hookChain) StreamSafe(in core.HookInput) bool {
	for _, h := range c {
		if s, ok := h.(core.StreamSafety); ok && !s.StreamSafe(in) {
			return false
		}
	}
	return true
}

func (c hookChain) Pre(ctx context.Context, in core.HookInput) (core.PreResult, error) {
	res := core.PreResult{Text: in.Text, Metadata: in.Metadata}
	for _, h := range c {
		r, err := h.Pre(ctx, in)
		if err != nil || r.Drop || r.Reply != "" {
			return r, err
		}
		res = r
		in.Text, in.Metadata = r.Text, r.Metadata
	}
	return res, nil
}

func (c hookChain) Post(ctx context.Context, in core.HookInput, answer string) (string, error) {
	for _, h := range c {
		var err error
		if answer, err = h.Post(ctx, in, answer); err != nil {
			return answer, err
		}
	}
	return answer, nil
}
