package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lib/pq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/opentalon/opentalon/core"
)

// The statements of this package are written once, in the SQL both
// engines accept: `?` placeholders, TRUE and FALSE, octet_length,
// RETURNING, aliased derived tables. A dialect holds only what truly
// differs between SQLite and PostgreSQL: the placeholders (rebound in one
// place, the statement cache), the few fragments the engines spell
// differently, how a transaction that reads then writes is kept right
// under concurrency, and which errors mean what. The queue's claim, memory
// search, the integrity check and backup branch on it where they differ
// by nature (queue.go, memories.go, ops.go).
type dialect struct {
	// name is "sqlite" or "postgres".
	name string
	// numbered says placeholders are $1, $2, … (PostgreSQL) instead of ?.
	numbered bool
	// concurrent says other processes write the same database at once
	// (PostgreSQL): a read-modify-write runs SERIALIZABLE and is re-run on
	// a serialization failure, and the queue takes explicit locks. SQLite
	// has one writer at a time (BEGIN IMMEDIATE), so neither is needed.
	concurrent bool
	// skipLocked ends a SELECT that claims rows other claimers may be
	// claiming at the same instant.
	skipLocked string
	// forUpdate ends a SELECT that locks the rows it reads until the
	// transaction ends.
	forUpdate string
	// strpos is the function that finds a substring: strpos(haystack,
	// needle) is 1-based, 0 when absent.
	strpos string
	// greatest is the larger of its arguments (SQLite's two-argument max).
	greatest string
	// uninterrupted says a statement that has started runs to its end
	// (see statementCtx).
	uninterrupted bool
}

var (
	sqliteDialect   = &dialect{name: "sqlite", strpos: "instr", greatest: "max", uninterrupted: true}
	postgresDialect = &dialect{name: "postgres", numbered: true, concurrent: true,
		skipLocked: " FOR UPDATE SKIP LOCKED", forUpdate: " FOR UPDATE", strpos: "strpos", greatest: "GREATEST"}
)

// statementCtx is the context a statement is handed to database/sql
// with. On SQLite a statement that has started runs to its end: a
// context that can be cancelled costs two goroutines per statement (the
// driver's, which would interrupt it, and database/sql's, which would
// close its rows), about 30 per message, and a local statement ends in
// well under a millisecond anyway. A context already ended still fails
// the statement before it starts, and a transaction whose context ends
// before its commit is rolled back (DB.tx1). Waiting for a connection
// does not end with it: the writer is held for milliseconds at a time on
// the message path, though longer by maintenance's prunes of a large
// database, which a caller then waits out. PostgreSQL keeps the
// cancellation: a statement there can wait on another replica's lock.
func (d *dialect) statementCtx(ctx context.Context) context.Context {
	if !d.uninterrupted || ctx.Err() != nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// rebind returns q with the dialect's placeholders: each ? outside a
// string literal, a quoted identifier or a comment becomes $1, $2, … on
// PostgreSQL. The statement cache calls it once per distinct query text.
func (d *dialect) rebind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(q[i+1:], c)
			if end < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+end+2])
			i += end + 1
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+end])
			i += end - 1
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// retryable says err is a transaction conflict that running the
// transaction again resolves: a serialization failure or a deadlock
// (PostgreSQL). SQLite waits for its one writer instead (busy_timeout).
func retryable(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// lockTimedOut says err is PostgreSQL's lock_timeout ending a wait for a
// lock (lock_not_available).
func lockTimedOut(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// uniqueViolation says err is a unique constraint refusing a row, by the
// engine's error code (never its message).
func uniqueViolation(err error) bool {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// errUnstorableText refuses a text PostgreSQL cannot hold.
var errUnstorableText = core.Errorf(core.KindInvalid,
	"the text holds a NUL byte or is not valid UTF-8, which a PostgreSQL TEXT column cannot store (SQLite can); remove the NUL bytes or encode the value (plugin state and Lua KV values take any bytes)")

// checkArgs refuses, on PostgreSQL, a string argument with a NUL byte or
// invalid UTF-8: the server would refuse it with an error naming neither
// the value nor the fix. Byte slices (BYTEA values) pass.
func (d *dialect) checkArgs(args []any) error {
	if !d.numbered {
		return nil
	}
	for _, a := range args {
		if s, ok := a.(string); ok && !storableText(s) {
			return errUnstorableText
		}
	}
	return nil
}

func storableText(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// refused returns args with the first offending one replaced by a value
// whose conversion fails with err, so a *sql.Row reports err.
func refused(args []any, err error) []any {
	out := append([]any(nil), args...)
	for i, a := range out {
		if s, ok := a.(string); ok && !storableText(s) {
			out[i] = badArg{err}
			break
		}
	}
	return out
}

// badArg is an argument that fails its conversion with err.
type badArg struct{ err error }

func (b badArg) Value() (driver.Value, error) { return nil, b.err }

// bytes passes s to a column of bytes: BYTEA on PostgreSQL (a Go string
// would be sent as text, and refused when it holds a NUL); SQLite keeps
// such values in TEXT columns, which hold any bytes.
func (d *dialect) bytes(s string) any {
	if !d.numbered {
		return s
	}
	return append(make([]byte, 0, len(s)), s...)
}
