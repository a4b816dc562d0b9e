// Package core is OpenTalon's vocabulary and its heart.
//
// It owns the types every other package speaks (inbound messages,
// reactions, conversation keys, chat messages, tool calls and results,
// replies, quality signals, error kinds), the small interfaces it needs
// from the rest of the system (Channel, Agent, Hooks, Store), and the
// Gateway: the durable, per-conversation ordered request pipeline that
// turns an accepted platform event into a delivered reply. The Gateway
// decides at intake who may talk to the bot (access.go: open, allowlist,
// pairing, admins) and tells an Observer what happens on the way
// (observe.go), for metrics.
//
// core imports nothing internal; every other package may import it.
package core
