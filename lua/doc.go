// Package lua runs OpenTalon's tier-2 plugins: operator-written Lua
// scripts (gopher-lua) that filter, classify or rewrite messages before
// the agent and answers after it. Engine implements core.Hooks, and
// core.HookSource: in the gateway its scripts are steps interleaved with
// the gRPC hook plugins' by order, a script's order being the number its
// file name starts with (steps.go).
//
// Every *.lua file of plugins.lua.scripts_dir is compiled once and may
// define filter(ctx), pre_hook(ctx), post_hook(ctx) and on_schedule(ctx)
// (run at every firing of a schedule, OnSchedule); scripts run in
// file-name order (engine.go, script.go). With plugins.lua.watch, fsnotify
// reloads a created, changed, renamed or removed file; one that fails to
// compile keeps its previous version (watch.go).
//
// Each run gets a fresh environment over the compiled chunk on a pooled
// state, so nothing a run stores in globals reaches the next
// conversation (run.go). ctx carries message, session_id, metadata,
// channel, user and the functions log, kv_get, kv_set and llm (ctxapi.go;
// kv in SQLite through store's lua_kv table, llm through core.Generator).
//
// The sandbox (sandbox.go) opens no library but whitelisted functions of
// string, table, math and os.time behind read-only tables. Limits: an
// execution timeout through the state's context, the memory budget
// checked by the run itself every few instructions and before a string is
// built (memory.go) with a heap watchdog as the backstop (watchdog.go),
// bounded string building (strlib.go) and concatenation (concat.go: every
// a .. b is rewritten into a call of the bounded one when the script
// loads, and every tail call checks the tail calls pending, whose
// traceback gopher-lua builds line by line), a pattern matcher whose recursion follows the pattern and never
// the input (pattern.go), registry and call-stack caps. A failed run fails
// that one message: a guard (a filter, a redacting post_hook, or a script
// with fail_closed = true) stops the message or withholds the answer, any
// other hook lets it go on unchanged; every failure is an operator event
// (Options.Events), and no failure disables a script.
//
// lua imports core only; store.DB implements its KV.
package lua
