// Package lua is reserved for OpenTalon's tier-2 plugins: sandboxed
// gopher-lua pre/post hooks with script discovery, hot reload and the ctx
// API (log, kv_get/kv_set, llm). The gateway already calls core.Hooks
// around the agent; this package will implement it. Nothing is built here
// yet: the Lua hooks are their own issue.
package lua
