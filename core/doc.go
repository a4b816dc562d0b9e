// Package core is OpenTalon's vocabulary and its heart.
//
// It owns the types every other package speaks (inbound messages,
// reactions, conversation keys, chat messages, tool calls and results,
// replies, quality signals, error kinds), the small interfaces it needs
// from the rest of the system (Channel, Agent, Hooks, Store), and the
// Gateway: the durable, per-conversation ordered request pipeline that
// turns an accepted platform event into a delivered reply. The Gateway
// decides at intake who may talk to the bot (access.go: open, allowlist,
// pairing, admins, and an auth provider's Authorizer after them) and
// tells an Observer what happens on the way (observe.go), for metrics.
//
// Besides platform messages the queue carries a schedule's firings
// (firing.go: EventScheduled, answered once in the schedule's
// conversation) and messages a plugin injected (inject.go). Hooks from
// several sources (Lua scripts, gRPC hook plugins) run interleaved by
// their order (hooks.go: OrderedHooks). events.go names the operator
// events sent to the notification sinks; blobs.go the blob store the
// gateway keeps files in.
//
// core imports nothing internal; every other package may import it.
package core
