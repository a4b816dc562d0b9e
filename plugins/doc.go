// Package plugins owns tier-1 gRPC plugins on the core side: discovery
// (plugin_dir plus explicit paths), launch and handshake over unix
// sockets, capabilities, the tool Registry, health checks, restart with
// backoff, the per-plugin state service (the namespace is bound to the
// plugin's connection, never named by the plugin), and the
// POST /api/plugins/llm/generate handler.
//
// It imports core, guard and proto. Plugins never see the registry, other
// plugins or the orchestrator: the only surfaces they get are the
// PluginService they serve and their own PluginState socket.
//
// Lifecycle: NewManager has no side effects; Start launches and registers
// the plugins and supervises them until Close, which stops the whole
// process group of every plugin.
package plugins
