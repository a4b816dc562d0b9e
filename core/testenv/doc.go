// Package testenv is how a test says it needs a program beyond Go
// (protoc, Python's gRPC, Chromium, PostgreSQL): without it the test is
// skipped with one line naming the Debian package to install, and under
// CI=true, where .ci/run installs every such package, it fails instead,
// so a missing tool cannot turn a CI run green by skipping.
//
// Only tests import it. The package imports nothing internal; every
// package's tests may import it.
package testenv
