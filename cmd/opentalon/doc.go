// Package main wires OpenTalon together: it loads the config, opens the
// store, builds providers, router, orchestrator, gateway and channels
// explicitly (no init-time registries), and runs the subcommands. The
// App type runs the whole gateway in-process so end-to-end tests can
// drive it through the console channel and fake servers.
package main
