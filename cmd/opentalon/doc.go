// Package main wires OpenTalon together: it loads the config, opens the
// store, builds providers, router, orchestrator, gateway and channels
// explicitly (no init-time registries), and runs the subcommands. The
// App type runs the whole gateway in-process so end-to-end tests can
// drive it through the console channel and fake servers.
//
// The wiring is named by what it wires: app.go (the App, its HTTP server
// and `run`), channels.go (the list of channels), router.go (providers,
// catalog, router, /model and escalation), plugins.go (tool plugins,
// guard, the plugin LLM API), lua.go (the Lua engine and the hooks'
// sources), extensions.go (routes, the scheduler and its firing runner,
// notification sinks, the auth provider, blobs), stores.go (every
// persistence interface the database is handed to); cli.go and cmd_*.go
// hold the subcommands. It decides nothing the packages it wires own.
package main
