// Package core is OpenTalon's vocabulary: the words every other package
// speaks and the small interfaces they implement for one another.
//
// The words: inbound messages and their files, reactions, conversation
// keys, chat messages, tool calls and results, turns and answers,
// replies, quality signals, sessions, queue items, schedules and their
// firings, access modes and pairings, operator events, error kinds (with
// the sentence a user is told for each, usertext.go) and Secret; and the
// records a store keeps for its consumers (records.go, memories.go,
// MediaFile), so no consumer depends on a store's own types.
//
// The interfaces: Channel and its optional capabilities, Sink, Agent,
// Hooks and HookSource, Interceptor, Generator, Store (what the gateway
// needs from persistence), PairingStore, MediaReader, Authorizer,
// FiringRunner, BlobStore, Observer and OpsEvents.
//
// The machine that turns an accepted event into a delivered reply — the
// Gateway — is core/gateway; scheduled tasks are core/schedule. core
// imports nothing internal; every other package may import it.
package core
