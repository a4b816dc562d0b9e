// Package pluginpb holds proto/plugin.proto, the contract between the core
// and tier-1 plugin processes, and its generated Go code (committed;
// `go generate ./proto` regenerates it). It imports nothing internal.
package pluginpb
