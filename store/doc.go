// Package store is OpenTalon's one SQLite database (<data_dir>/opentalon.db,
// modernc.org/sqlite, pure Go).
//
// Open applies the connection pragmas (WAL, busy timeout, foreign keys,
// synchronous=NORMAL) through the DSN so every pooled connection has them,
// keeps one writer connection with immediate transactions and a separate
// read pool, and applies the embedded numbered migrations, each in its own
// transaction. An enqueue's commit is flushed to the disk (the write-ahead
// log is fsynced) before Enqueue returns: the platform is acknowledged
// after it, so it must survive a power loss too. One file per table group: queue.go (the request queue),
// sessions.go (sessions and their messages), lifecycle.go (session
// state, compaction, expiry and export), replies.go (replies and their
// deliveries), routing.go (signals, affinity, auth profile state and the
// usage ledger), memories.go (long-term memories and workflows, searched
// with FTS5), pluginstate.go (per-plugin key-value state), luakv.go
// (per-Lua-script key-value state) and schedules.go (scheduled tasks and
// their firing state; a firing itself is a queue row).
//
// blobs.go is the default blob store: files under <data_dir>/blobs,
// outside the database; blobtest is the conformance test every blob
// store passes.
//
// store imports only core. The records it returns to its consumers
// (memories, media files, plugin state, operators' reads) are core's, so
// a second store implementation needs nothing from this package;
// cmd/opentalon/stores.go lists every interface the database serves.
// The clock is injected.
package store
