package main

import (
	"context"
	"net/http"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/plugins"
)

// buildTools builds the tool registry and the guard pipeline every plugin
// result passes (plugins.tools). The plugin processes start in Run.
func (a *App) buildTools() (orchestrator.ToolRunner, error) {
	tc := a.cfg.Plugins.Tools
	a.registry = plugins.NewRegistry(func(name string) plugins.Limits {
		l := tc.LimitsFor(name)
		return plugins.Limits{Timeout: l.Timeout.D(), MaxResponseBytes: l.MaxResponseBytes}
	})
	san, err := guard.NewSanitizer(tc.Sanitize.ExtraPatterns)
	if err != nil {
		return nil, err
	}
	g := guard.New(a.registry, san, a.log)
	var tools orchestrator.ToolRunner = orchestrator.PluginTools{Registry: a.registry, Guard: g, CallsPerTurn: tc.MaxCallsPerTurn}
	if a.metrics != nil {
		g.SetObserver(a.metrics)
		tools = timedTools{ToolRunner: tools, m: a.metrics}
	}
	return tools, nil
}

// startPlugins launches the discovered plugin processes; apiURL is where
// they reach the plugin LLM API ("" when the server is off).
func (a *App) startPlugins(ctx context.Context, apiURL string) error {
	tc := a.cfg.Plugins.Tools
	if tc.PluginDir == "" && len(tc.Plugins) == 0 {
		return nil
	}
	specs := make([]plugins.Spec, 0, len(tc.Plugins))
	for _, p := range tc.Plugins {
		specs = append(specs, plugins.Spec{Path: p})
	}
	var env []string
	if apiURL != "" {
		env = append(env, "OPENTALON_API_URL="+apiURL)
		if k := a.cfg.Server.APIKey; k.IsSet() {
			env = append(env, "OPENTALON_API_KEY="+k.Value())
		}
	}
	var onEvent func(plugin, event string)
	switch {
	case a.metrics != nil && a.pluginWatch != nil:
		onEvent = func(plugin, event string) {
			a.metrics.PluginEvent(plugin, event)
			a.pluginWatch.OnEvent(plugin, event)
		}
	case a.metrics != nil:
		onEvent = a.metrics.PluginEvent
	case a.pluginWatch != nil:
		onEvent = a.pluginWatch.OnEvent
	}
	mgr := plugins.NewManager(plugins.Options{
		Dir: tc.PluginDir, Plugins: specs, Registry: a.registry, Extensions: a.ext, State: a.db, Bindings: a.db,
		HealthInterval: tc.HealthCheckInterval.D(), RestartOnFailure: tc.RestartOnFailure,
		MaxRestarts: tc.MaxRestarts, Env: env, Logger: a.log, Now: a.opts.Now, OnEvent: onEvent,
		Sandbox: &plugins.Sandbox{
			RunAs: tc.RunAs, Landlock: tc.Sandbox.Landlock, ReadPaths: tc.Sandbox.ReadPaths, WritePaths: tc.Sandbox.WritePaths,
			Limits: plugins.ProcessLimits{AddressSpace: uint64(tc.ProcessLimits.AddressSpaceMB) << 20,
				OpenFiles: uint64(tc.ProcessLimits.OpenFiles), Processes: uint64(tc.ProcessLimits.Processes)},
		},
		StateLimits: plugins.StateLimits{
			Quota:           core.PluginStateQuota{MaxKeys: tc.State.MaxKeys, MaxBytes: tc.State.MaxBytes},
			WritesPerSecond: tc.State.WritesPerSecond,
		},
	})
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	a.closers = append(a.closers, mgr.Close)
	a.log.Info("plugins started", "running", mgr.Running())
	return nil
}

// mountPluginAPI serves POST /api/plugins/llm/generate (seed 003).
func (a *App) mountPluginAPI(mux *http.ServeMux) {
	mux.Handle("POST "+plugins.GeneratePath, plugins.NewGenerateHandler(a.router, a.cfg.Server.APIKey.Value(), a.log))
}
