package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

// freshImage is the database file createFresh makes, compressed
// (schema_sqlite.db.gz, generated with schema_sqlite.sql by go generate;
// TestFreshImage fails when it is not the newest schema): a new SQLite
// database is this file written out, with no SQL run. Creating the
// schema ran about 80 CREATE statements through SQLite's parser and,
// before them, switched the empty file from a rollback journal to WAL
// (a journal file and three fsyncs): about 11 ms of a first start on the
// benchmark machine, where the image takes one write, a file and a
// directory fsync. Its migrations are recorded at time 0: OpenFile
// stamps them when it used the image.
//
//go:embed schema_sqlite.db.gz
var freshImage []byte

// writeFreshImage creates the SQLite database file at path from
// freshImage, whole or not at all: it is written beside path, synced,
// and linked to path only while no file is there (the link is synced
// later: nameSync) (of two processes
// creating it, one wins and the other opens its file). It reports false,
// having written nothing at path, when path exists or the file system
// cannot link (OpenFile then creates the database with SQL).
func writeFreshImage(path string) (bool, error) {
	if len(freshImage) == 0 {
		return false, nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-*") // mode 0600
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	zr, err := gzip.NewReader(bytes.NewReader(freshImage))
	if err == nil {
		_, err = io.Copy(tmp, zr)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("write the new database's image: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	// The new name is made durable beside the start (nameSync): the
	// file's content already is, so a power cut leaves either no database
	// or this one whole.
	return true, nil
}
