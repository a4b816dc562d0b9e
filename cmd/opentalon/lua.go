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
		KVQuota:      core.PluginStateQuota{MaxKeys: l.Limits.KVMaxKeys, MaxBytes: l.Limits.KVMaxBytes},
		Logger:       log,
	}
}

// buildHooks returns the hooks around every answer, interleaved by
// order (a failing one is logged and skipped): the Lua engine when
// plugins.lua.scripts_dir is set (built here and started by Run, closed
// with the app), the hook plugins' hooks when plugins run, then
// AppOptions.Hooks, whose errors fail the request; nil when there are
// none.
func (a *App) buildHooks() core.Hooks {
	if a.cfg.Plugins.Lua.ScriptsDir != "" {
		o := luaOptions(a.cfg.Plugins.Lua, a.router, a.db, a.log)
		o.Events = a.events()
		if a.metrics != nil {
			o.Observer = a.metrics
		}
		a.lua = lua.New(o)
		a.closers = append(a.closers, a.lua.Close)
	}
	sources := a.hookSources()
	if a.opts.Hooks != nil {
		sources = append(sources, gateway.HooksAt("app", gateway.LastOrder, a.opts.Hooks))
	}
	if len(sources) == 0 {
		return nil
	}
	ordered := gateway.NewOrderedHooks(a.log, sources...)
	if a.metrics != nil {
		ordered.Observe(a.metrics)
	}
	return ordered
}

// startLua loads the Lua scripts (a script that does not compile fails
// the start with its file and line) and, with plugins.lua.watch, follows
// their changes until Close.
func (a *App) startLua(ctx context.Context) error {
	if a.lua == nil {
		return nil
	}
	if err := a.lua.Start(ctx); err != nil {
		// The scripts are configuration: a missing directory or a script
		// that does not compile is the operator's to fix (exitConfig).
		return core.Errorf(core.KindInvalid, "%w", err)
	}
	return nil
}
