// Package plugins owns tier-1 gRPC plugins on the core side: discovery
// (plugin_dir plus explicit paths), launch and handshake over unix
// sockets, capabilities, the tool Registry, health checks, restart with
// backoff, the per-plugin state service (the namespace is bound to the
// plugin's connection, never named by the plugin; quotas and a write
// rate limit), and the POST /api/plugins/llm/generate handler.
//
// Extensions (ext*.go) holds the extension points beyond tools that the
// running plugins declared: their request and response hooks (a
// core.HookSource whose output passes the guard's sanitizer before the
// LLM sees it), their HTTP routes under /api/plugins/<name>/ (forwarded
// over gRPC, with the API key, a body limit and a timeout, and the
// messages a handler injects committed before the response), their
// schedules, and the notify, authorize (Authorizer, cached, failing
// closed), blob (Blobs) and LLM provider services.
//
// A plugin is untrusted code. Each runs in its own session with a
// minimal environment and no_new_privs, in a private 0700 directory
// holding its sockets and its TMPDIR; with a Sandbox also as the run_as
// user (when the core is root), in a Landlock domain of its own where
// the kernel offers one (landlock.go), and under resource limits set
// before its first instruction (launch.go). The core marks itself
// non-dumpable and logs which protections are active. A plugin name is
// bound to its binary (path and SHA-256) the first time it registers;
// plugin_dir and binaries others may write are refused (perms.go).
//
// It imports core, guard and proto (the stores it uses are interfaces
// here, over core's records). Plugins never see the
// registry, other plugins or the orchestrator: the only surfaces they
// get are the services they serve on their own socket and their own
// PluginState socket.
//
// Lifecycle: NewManager has no side effects; Start launches and registers
// the plugins and supervises them until Close, which stops the whole
// process group of every plugin.
package plugins
