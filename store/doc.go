// Package store is OpenTalon's database: one embedded SQLite file
// (<data_dir>/opentalon.db, modernc.org/sqlite, pure Go; the default) or
// one PostgreSQL database several replicas share (state.driver: postgres;
// github.com/lib/pq through database/sql). One package for both:
// the statements are written once, and dialect.go holds what truly
// differs (placeholders, row locks, error codes); see docs/architecture.md,
// "The store".
//
// On SQLite, Open applies the connection pragmas (WAL, busy timeout,
// foreign keys, synchronous=NORMAL) through the DSN so every pooled
// connection has them, keeps one writer connection with immediate
// transactions and a separate read pool, and applies the embedded
// numbered migrations (migrations/), each in its own transaction. An
// enqueue's commit is flushed to the disk (the write-ahead log is
// fsynced) before Enqueue returns: the platform is acknowledged after it,
// so it must survive a power loss too. On PostgreSQL (postgres.go) it
// checks the server, applies migrations_pg/ under an advisory lock and
// runs read-modify-writes SERIALIZABLE, re-run on a conflict.
//
// One file per table group: queue.go and lease.go (the leased request
// queue), sessions.go (sessions and their messages), lifecycle.go
// (session state, compaction, expiry and export), replies.go (replies
// and their deliveries), routing.go (signals, affinity, auth profile
// state and the usage ledger), memories.go (long-term memories and
// workflows, searched with FTS5 or a tsvector), pluginstate.go
// (per-plugin key-value state), luakv.go (per-Lua-script key-value
// state), schedules.go (scheduled tasks and their firing state; a firing
// itself is a queue row), ops.go (operators' reads, checks and backup)
// and copy.go (state migrate's copy from SQLite to PostgreSQL).
//
// blobs.go is the default blob store: files under <data_dir>/blobs,
// outside the database; blobtest is the conformance test every blob
// store passes. storetest is the contract every engine passes, pgtest
// the PostgreSQL tests find or start.
//
// store imports only core. The records it returns to its consumers
// (memories, media files, plugin state, operators' reads) are core's, so
// a second store implementation needs nothing from this package;
// cmd/opentalon/stores.go lists every interface the database serves.
// The clock is injected.
package store
