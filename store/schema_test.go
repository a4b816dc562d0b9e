package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

var updateSchema = flag.Bool("update", false, "rewrite schema_sqlite.sql and schema_sqlite.db.gz from the migrations (go generate ./store)")

const (
	freshSchemaFile = "schema_sqlite.sql"
	freshImageFile  = "schema_sqlite.db.gz"
)

// dumpSchema writes db's schema and the rows its tables hold as the
// script schema_sqlite.sql is: a header naming version, every CREATE
// statement in the order it was made (SQLite's own objects and the
// shadow tables of the FTS5 index left out: creating the rest makes
// them), then an INSERT per row. The rows of schema_migrations are left
// out: createFresh writes them.
func dumpSchema(t *testing.T, db *sql.DB, version int) string {
	t.Helper()
	shadow := map[string]bool{}
	for _, name := range queryStrings(t, db, `SELECT name FROM pragma_table_list WHERE type = 'shadow'`) {
		shadow[name] = true
	}
	var b strings.Builder
	b.WriteString("-- The SQLite schema the migrations in migrations/ produce, made on a new\n")
	b.WriteString("-- database in one transaction (schema.go). Generated from the migrations by\n")
	b.WriteString("-- go generate ./store; do not edit.\n")
	fmt.Fprintf(&b, "%s%d\n", freshSchemaVersionLine, version)
	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name, stmt string
		if err := rows.Scan(&name, &stmt); err != nil {
			t.Fatal(err)
		}
		if shadow[name] {
			continue
		}
		b.WriteString(stmt + ";\n")
	}
	rows.Close()
	tables = queryStrings(t, db, `SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name <> 'schema_migrations' AND name NOT LIKE 'sqlite\_schema' ESCAPE '\' ORDER BY name = 'sqlite_sequence', name`)
	for _, table := range tables {
		if shadow[table] {
			continue
		}
		for _, row := range tableRows(t, db, table) {
			fmt.Fprintf(&b, "INSERT INTO %s VALUES (%s);\n", table, row)
		}
	}
	return b.String()
}

func queryStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// tableRows are a table's rows as SQL literals, in rowid (or key) order.
func tableRows(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT * FROM "` + table + `" ORDER BY 1`)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		lits := make([]string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				lits[i] = "NULL"
			case int64:
				lits[i] = strconv.FormatInt(v, 10)
			case float64:
				lits[i] = strconv.FormatFloat(v, 'g', -1, 64)
			case string:
				lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			case []byte:
				lits[i] = "X'" + hex.EncodeToString(v) + "'"
			default:
				t.Fatalf("%s: a value of type %T", table, v)
			}
		}
		out = append(out, strings.Join(lits, ", "))
	}
	return out
}

// migratedDB is a database made by replaying every migration (the path
// of a database made before schema_sqlite.sql, and of every upgrade):
// with the table of applied migrations there, migrate does not take the
// fresh schema.
func migratedDB(t *testing.T) (path string, latest int) {
	t.Helper()
	ms, err := loadMigrations("migrations")
	if err != nil {
		t.Fatal(err)
	}
	path = t.TempDir() + "/" + FileName
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(migrationsTable["sqlite"]); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := OpenFile(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	return path, ms[len(ms)-1].version
}

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestFreshSchemaFile: schema_sqlite.sql is what the migrations produce
// (go generate ./store rewrites it), and a new database made from it is
// the same as one made by the migrations — every object SQLite keeps,
// every row, the migration history (so later migrations apply to it as
// to any other) — and keeps the mode of its file.
func TestFreshSchemaFile(t *testing.T) {
	migrated, latest := migratedDB(t)
	want := dumpSchema(t, openRaw(t, migrated), latest)
	if *updateSchema {
		if err := os.WriteFile(freshSchemaFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(freshImageFile, buildFreshImage(t, want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s and %s (schema version %d)", freshSchemaFile, freshImageFile, latest)
		return
	}
	if freshSchema != want {
		t.Fatalf("%s is not the schema the migrations produce (a migration was added or changed): run go generate ./store\n--- %s\n%s\n--- the migrations\n%s", freshSchemaFile, freshSchemaFile, freshSchema, want)
	}
	for _, tc := range []struct {
		name string
		o    Options
	}{{"from the image", Options{}}, {"with SQL", Options{scriptsOnly: true}}} {
		t.Run(tc.name, func(t *testing.T) { checkFreshDB(t, tc.o, migrated, want, latest) })
	}
}

// checkFreshDB: a new database OpenFile makes with o is the same as the
// migrated one.
func checkFreshDB(t *testing.T, o Options, migrated, want string, latest int) {
	ctx := context.Background()
	path := t.TempDir() + "/" + FileName
	db, err := OpenFile(ctx, path, o)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	fresh, old := openRaw(t, path), openRaw(t, migrated)
	if got := dumpSchema(t, fresh, latest); got != want {
		t.Fatalf("a new database differs from a migrated one:\n%s\nwant\n%s", got, want)
	}
	for _, q := range []string{
		`SELECT type || ' ' || name || ' ' || tbl_name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY name`,
		`SELECT version || ' ' || name FROM schema_migrations ORDER BY version`,
		`SELECT journal_mode FROM pragma_journal_mode`,
		`SELECT user_version FROM pragma_user_version`,
	} {
		if got, want := strings.Join(queryStrings(t, fresh, q), "\n"), strings.Join(queryStrings(t, old, q), "\n"); got != want {
			t.Errorf("%s: new database\n%s\nmigrated\n%s", q, got, want)
		}
	}
	for _, table := range queryStrings(t, old, `SELECT name FROM pragma_table_list WHERE type = 'shadow' ORDER BY name`) {
		if got, want := tableRows(t, fresh, table), tableRows(t, old, table); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: new database %q, migrated %q", table, got, want)
		}
	}
	if n := len(queryStrings(t, fresh, `SELECT name FROM schema_migrations WHERE applied_at = 0`)); n > 0 {
		t.Errorf("%d migrations recorded without the time they were applied", n)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("database file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

// TestFreshSchemaStale: a script that is not the newest migration's is
// not used; the migrations make the database.
func TestFreshSchemaVersion(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"-- x\n" + freshSchemaVersionLine + "140\nCREATE TABLE a (b);\n", 140},
		{"-- x\nCREATE TABLE a (b);\n", 0},
		{"-- x\n" + freshSchemaVersionLine + "x\n", 0},
		{freshSchema, freshSchemaVersion(freshSchema)},
	} {
		if got := freshSchemaVersion(tc.script); got != tc.want {
			t.Errorf("freshSchemaVersion(%q) = %d, want %d", tc.script[:min(len(tc.script), 40)], got, tc.want)
		}
	}
	if freshSchemaVersion(freshSchema) == 0 {
		t.Errorf("%s names no schema version in its header", freshSchemaFile)
	}
}

// buildFreshImage makes the database createFresh makes from script, its
// migrations recorded at time 0, and returns its file gzipped: the
// content of schema_sqlite.db.gz.
func buildFreshImage(t *testing.T, script string) []byte {
	t.Helper()
	ms, err := loadMigrations("migrations")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/" + FileName
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(script); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := tx.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil { // the log copied into the file and removed
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatalf("%s-wal left after closing", path)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression) // no name, no time: the same bytes each time
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(file); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFreshImage: schema_sqlite.db.gz is the database schema_sqlite.sql
// makes, with every migration recorded (at time 0, which OpenFile
// stamps), in WAL mode. A stale image would still be migrated to the
// newest schema, but slowly: the test fails first.
func TestFreshImage(t *testing.T) {
	migrated, latest := migratedDB(t)
	want := dumpSchema(t, openRaw(t, migrated), latest)
	zr, err := gzip.NewReader(bytes.NewReader(freshImage))
	if err != nil {
		t.Fatalf("%s: %v", freshImageFile, err)
	}
	file, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", freshImageFile, err)
	}
	path := t.TempDir() + "/" + FileName
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	img := openRaw(t, path)
	if got := dumpSchema(t, img, latest); got != want {
		t.Fatalf("%s is not the schema the migrations produce: run go generate ./store\n--- the image\n%s\n--- the migrations\n%s", freshImageFile, got, want)
	}
	ms, err := loadMigrations("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var wantRows []string
	for _, m := range ms {
		wantRows = append(wantRows, fmt.Sprintf("%d %s 0", m.version, m.name))
	}
	if got := queryStrings(t, img, `SELECT version || ' ' || name || ' ' || applied_at FROM schema_migrations ORDER BY version`); strings.Join(got, "\n") != strings.Join(wantRows, "\n") {
		t.Errorf("%s records the migrations\n%s\nwant\n%s\n(run go generate ./store)", freshImageFile, strings.Join(got, "\n"), strings.Join(wantRows, "\n"))
	}
	if got := queryStrings(t, img, `SELECT journal_mode FROM pragma_journal_mode`); len(got) != 1 || got[0] != "wal" {
		t.Errorf("%s journal_mode = %v, want wal", freshImageFile, got)
	}
	if !bytes.Equal(file[18:20], []byte{2, 2}) {
		t.Errorf("%s file format bytes = %v, want WAL's 2, 2", freshImageFile, file[18:20])
	}
}

// TestFreshImageNeverOverwrites: the image is written only where no file
// is; a database file that exists, even empty, is opened as it is.
func TestFreshImageNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/" + FileName
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	created, err := writeFreshImage(path)
	if created || err != nil {
		t.Fatalf("writeFreshImage over an existing file = %v, %v; want false, nil", created, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("the existing file was changed: %v, %v", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left in the data directory: %v", entries)
	}
	// The empty file gets its schema with SQL.
	db, err := OpenFile(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := queryStrings(t, openRaw(t, path), `SELECT count(*) FROM schema_migrations WHERE applied_at > 0`); len(got) != 1 || got[0] == "0" {
		t.Errorf("migrations recorded with a time: %v", got)
	}

	created, err = writeFreshImage(dir + "/new.db")
	if !created || err != nil {
		t.Fatalf("writeFreshImage on a new path = %v, %v", created, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".new-") {
			t.Errorf("the image's temporary file %s was left", e.Name())
		}
	}
	if fi, err := os.Stat(dir + "/new.db"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new.db: %v, %v; want mode 0600", fi, err)
	}
}
