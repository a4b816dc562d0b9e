// Package pgtest gives tests a PostgreSQL database of their own, without a
// manual step: in the spirit of net/http/httptest.
//
// The first call in a test binary starts a private, throwaway server from
// the installed PostgreSQL binaries (initdb and pg_ctl in a temporary
// directory, on a free port of 127.0.0.1; as root through
// `runuser -u postgres`), or uses the server OPENTALON_TEST_POSTGRES names
// (a DSN of a role that may create databases). Each test then gets a fresh
// database, dropped when it ends. A watchdog process stops the private
// server and removes its directory once the test binary has exited, however
// it exits.
//
// Without PostgreSQL binaries a test that asks for a database is skipped
// with one line saying how to install them (apt-get install postgresql),
// except under CI=true, where it fails.
//
// The server runs with fsync on; test databases commit without waiting for
// the write-ahead log (synchronous_commit off), DurableDSN's database waits
// for it (benchmarks measure durable commits).
//
// NotYet puts a test's database behind a port that refuses connections,
// then answers as a server still starting, then passes connections on:
// for tests of a gateway started before its database.
package pgtest
