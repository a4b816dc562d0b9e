// Package storetest is the contract of the store: every behaviour the rest
// of OpenTalon relies on, written once and run on every engine (in the
// spirit of litestream's one integration suite run against each backend).
//
// Run takes an Engine — a way to open fresh databases, and more than one
// handle on one database (the replicas of a deployment) — and checks the
// queue (order, dedupe, the pending cap, leases, fencing, take-back),
// replies and their parts, sessions and their TTL, memories (search
// membership and the obvious top hit), plugin state (namespaces, quotas,
// any bytes), Lua KV, affinity, signals, usage, schedules, pairings,
// settings (the values admins set in chat),
// media and the database checks, through core's interfaces where core has
// them. RunRaces adds what only a database with concurrent writers can get
// wrong: many handles claiming at once, concurrent read-modify-writes at a
// quota. store's own tests run both on SQLite and on PostgreSQL
// (store/pgtest finds or starts a server).
package storetest
