package store

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

//go:generate go test -run TestFreshSchemaFile -update .

// freshSchema is the SQLite schema the migrations in migrations/ produce,
// as one script (schema_sqlite.sql, generated from them by go generate;
// TestFreshSchemaFile fails when it differs from what they produce). A
// new database gets it in one transaction instead of replaying every
// migration: replaying rebuilds tables and re-parses the growing schema
// after each ALTER, about 20 ms against 4 on the benchmark machine.
//
//go:embed schema_sqlite.sql
var freshSchema string

// freshSchemaVersionLine names, in the script's header, the newest
// migration it includes.
const freshSchemaVersionLine = "-- schema_version: "

// freshSchemaVersion is the migration freshSchema stands for (0 when its
// header does not say).
func freshSchemaVersion(script string) int {
	_, rest, ok := strings.Cut(script, "\n"+freshSchemaVersionLine)
	if !ok {
		return 0
	}
	line, _, _ := strings.Cut(rest, "\n")
	v, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	return v
}

// createFresh gives an empty SQLite database its whole schema and its
// migration history (every migration of ms, applied now) in one
// transaction. It does nothing and returns false when the database is
// not empty (another process created it first) or freshSchema is not
// that of the newest migration: migrate then applies the migrations.
func (db *DB) createFresh(ctx context.Context, conn *sql.Conn, ms []migration) (bool, error) {
	if len(ms) == 0 || freshSchemaVersion(freshSchema) != ms[len(ms)-1].version {
		return false, nil
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var objects int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&objects); err != nil {
		return false, err
	}
	if objects > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, freshSchema); err != nil {
		return false, fmt.Errorf("create the schema (schema_sqlite.sql): %w", err)
	}
	q := strings.Builder{}
	q.WriteString(`INSERT INTO schema_migrations (version, name, applied_at) VALUES `)
	args := make([]any, 0, 3*len(ms))
	now := db.ms()
	for i, m := range ms {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?)")
		args = append(args, m.version, m.name, now)
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
