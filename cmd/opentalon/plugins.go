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
	var creds *plugins.Credentials
	if apiURL != "" {
		env = append(env, "OPENTALON_API_URL="+apiURL)
		if a.cfg.Server.APIKey.IsSet() {
			// Each plugin gets a key of its own, never server.api_key.
			creds = a.pluginKeys
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
		Dir: tc.PluginDir, Plugins: specs, SocketParent: a.cfg.State.DataDir, Registry: a.registry, Extensions: a.ext, State: a.db, Bindings: a.db,
		HealthInterval: tc.HealthCheckInterval.D(), RestartOnFailure: tc.RestartOnFailure,
		MaxRestarts: tc.MaxRestarts, Env: env, Credentials: creds, Logger: a.log, Now: a.opts.Now, OnEvent: onEvent,
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

// mountPluginAPI serves POST /api/plugins/llm/generate (seed 003) to the
// operator's server.api_key and the plugins' own keys.
func (a *App) mountPluginAPI(mux *http.ServeMux) {
	// Every method: the handler answers another than POST with 405 and
	// the usage (the plugins' routes would answer 404).
	mux.Handle(plugins.GeneratePath, plugins.NewGenerateHandler(a.router, a.pluginAPIKeys(), a.log))
}

// pluginAPIKeys are the keys of the core's HTTP API: server.api_key and,
// when it is set, each plugin's own.
func (a *App) pluginAPIKeys() plugins.Keys {
	k := plugins.Keys{Operator: a.cfg.Server.APIKey.Value()}
	if a.cfg.Server.APIKey.IsSet() {
		k.Plugins = a.pluginKeys
	}
	return k
}
