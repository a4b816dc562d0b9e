package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CopiedTable is what CopyFrom did to one table.
type CopiedTable struct {
	Table string
	// Rows were read from the source; Copied of them were new to the
	// target (a re-run copies only what is missing).
	Rows, Copied int
	// Repaired counts texts PostgreSQL cannot hold (a NUL byte, invalid
	// UTF-8) that were stored without the NUL bytes and with U+FFFD for
	// the invalid bytes.
	Repaired int
	// Missing counts, for media_bytes, the media rows whose file is not
	// in the source's media directory (swept, deleted): their bytes were
	// not copied, and they are not among Rows.
	Missing int
}

// MediaBytesTable is the CopiedTable of the media files' bytes: on
// SQLite they are files in the media directory only, on PostgreSQL
// replicas share them in media_bytes.
const MediaBytesTable = "media_bytes"

// CopyFrom copies every row of src, a SQLite database, into db, a
// PostgreSQL database at the same schema version (`opentalon state
// migrate`): ids are preserved, the id sequences move past every id
// copied (and past every request id a table refers to), and a row the
// target has already is left as it is, so a re-run copies only what is
// missing. The bytes of the media files, which SQLite keeps only as files
// in its media directory, go into media_bytes, where replicas read them
// (MediaBytesTable, last). Items the source left running are taken back
// at once (the gateway of the source is stopped). The caller keeps every
// gateway off the source while it runs. done is called after each table.
func (db *DB) CopyFrom(ctx context.Context, src *DB, done func(CopiedTable)) ([]CopiedTable, error) {
	if db.d != postgresDialect || src.d != sqliteDialect {
		return nil, fmt.Errorf("copy: from a SQLite database into a PostgreSQL one only")
	}
	sv, err := src.SchemaVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy: schema version of %s: %w", src.name, err)
	}
	tv, err := db.SchemaVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy: schema version of %s: %w", db.name, err)
	}
	if sv != tv {
		return nil, fmt.Errorf("copy: %s has schema version %d, %s has %d; run the same opentalon version on both", src.name, sv, db.name, tv)
	}
	if err := db.checkNoClash(ctx, src); err != nil {
		return nil, err
	}
	var out []CopiedTable
	for _, t := range Tables {
		c, err := db.copyTable(ctx, src, t)
		if err != nil {
			return out, fmt.Errorf("copy table %s: %w", t, err)
		}
		out = append(out, c)
		if done != nil {
			done(c)
		}
	}
	c, err := db.copyMediaBytes(ctx, src)
	if err != nil {
		return out, fmt.Errorf("copy the media files' bytes: %w", err)
	}
	out = append(out, c)
	if done != nil {
		done(c)
	}
	// Nothing runs on the source: its claims are dead (the trigger makes
	// their heads due).
	if _, err := db.w.DB.ExecContext(ctx, `UPDATE queue SET lease_until = 0 WHERE status = 'running'`); err != nil {
		return out, fmt.Errorf("copy: take back the source's claims: %w", err)
	}
	if err := db.moveSequences(ctx, src); err != nil {
		return out, err
	}
	return out, nil
}

// copyMediaBytes puts into the target's media_bytes the bytes of every
// media file of src the target lacks, read from src's media directory
// one file at a time (each in a statement of its own, so a file is in
// memory only while it is sent). A row whose file is gone is counted as
// Missing and skipped; a file the target has already is not read.
func (db *DB) copyMediaBytes(ctx context.Context, src *DB) (CopiedTable, error) {
	c := CopiedTable{Table: MediaBytesTable}
	rows, err := src.r.DB.QueryContext(ctx, `SELECT sha256 FROM media ORDER BY sha256`)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	dir := src.mediaDir()
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			return c, err
		}
		var have bool
		if err := db.w.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM media_bytes WHERE sha256 = $1)`, sha).Scan(&have); err != nil {
			return c, fmt.Errorf("media %s: %w", sha, err)
		}
		if have {
			c.Rows++
			continue
		}
		if !validSHA(sha) {
			// It names no file.
			c.Missing++
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, sha))
		if errors.Is(err, fs.ErrNotExist) {
			c.Missing++
			continue
		}
		if err != nil {
			return c, fmt.Errorf("media %s: %w", sha, err)
		}
		res, err := db.w.DB.ExecContext(ctx, `INSERT INTO media_bytes (sha256, data) SELECT $1, $2::bytea
			WHERE EXISTS (SELECT 1 FROM media WHERE sha256 = $1) ON CONFLICT (sha256) DO NOTHING`, sha, data)
		if err != nil {
			return c, fmt.Errorf("media %s: %w", sha, err)
		}
		c.Rows++
		if n, _ := res.RowsAffected(); n > 0 {
			c.Copied++
		}
	}
	return c, rows.Err()
}

// pgColumn is a column of the target table.
type pgColumn struct{ name, typ string }

func (db *DB) copyTable(ctx context.Context, src *DB, table string) (CopiedTable, error) {
	c := CopiedTable{Table: table}
	rows, err := db.w.DB.QueryContext(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER' ORDER BY ordinal_position`, table)
	if err != nil {
		return c, err
	}
	var cols []pgColumn
	for rows.Next() {
		var col pgColumn
		if err := rows.Scan(&col.name, &col.typ); err != nil {
			rows.Close()
			return c, err
		}
		cols = append(cols, col)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c, err
	}
	if len(cols) == 0 {
		return c, fmt.Errorf("the PostgreSQL database has no table %s", table)
	}
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, col := range cols {
		names[i], marks[i] = col.name, "$"+strconv.Itoa(i+1)
	}
	list := strings.Join(names, ", ")
	order := ""
	if slices.ContainsFunc(cols, func(c pgColumn) bool { return c.name == "id" }) {
		// In id order: the queue's trigger makes the first unfinished
		// item of a conversation its head.
		order = " ORDER BY id"
	}
	srcRows, err := src.r.DB.QueryContext(ctx, `SELECT `+list+` FROM `+table+order)
	if err != nil {
		return c, fmt.Errorf("read the SQLite table (its columns must be %s): %w", list, err)
	}
	defer srcRows.Close()
	tx, err := db.w.DB.BeginTx(ctx, nil)
	if err != nil {
		return c, err
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO `+table+` (`+list+`) VALUES (`+strings.Join(marks, ", ")+`) ON CONFLICT DO NOTHING`)
	if err != nil {
		return c, err
	}
	defer ins.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for srcRows.Next() {
		if err := srcRows.Scan(ptrs...); err != nil {
			return c, err
		}
		args := make([]any, len(cols))
		for i, col := range cols {
			v, repaired, err := convert(vals[i], col.typ)
			if err != nil {
				return c, fmt.Errorf("row %d, column %s: %w", c.Rows+1, col.name, err)
			}
			if repaired {
				c.Repaired++
			}
			args[i] = v
		}
		res, err := ins.ExecContext(ctx, args...)
		if err != nil {
			return c, fmt.Errorf("row %d: %w", c.Rows+1, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			c.Copied++
		}
		c.Rows++
	}
	if err := srcRows.Err(); err != nil {
		return c, err
	}
	return c, tx.Commit()
}

// convert turns a value SQLite returned into one for a PostgreSQL column
// of type typ; repaired says a text had to lose bytes PostgreSQL cannot
// hold.
func convert(v any, typ string) (any, bool, error) {
	if v == nil {
		return nil, false, nil
	}
	switch typ {
	case "boolean":
		switch x := v.(type) {
		case int64:
			return x != 0, false, nil
		case bool:
			return x, false, nil
		}
	case "bytea":
		switch x := v.(type) {
		case string:
			return append(make([]byte, 0, len(x)), x...), false, nil
		case []byte:
			return append(make([]byte, 0, len(x)), x...), false, nil
		}
	case "text":
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		case int64:
			s = strconv.FormatInt(x, 10)
		case float64:
			s = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			return nil, false, fmt.Errorf("a %T where text is expected", v)
		}
		if storableText(s) {
			return s, false, nil
		}
		return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD"), true, nil
	case "bigint", "integer":
		switch x := v.(type) {
		case int64:
			return x, false, nil
		case float64:
			return int64(x), false, nil
		case bool:
			if x {
				return int64(1), false, nil
			}
			return int64(0), false, nil
		}
	case "double precision", "real":
		switch x := v.(type) {
		case float64:
			return x, false, nil
		case int64:
			return float64(x), false, nil
		}
	default:
		return v, false, nil
	}
	return nil, false, fmt.Errorf("a %T where %s is expected", v, typ)
}

// moveSequences moves every id sequence past the ids copied: past the
// table's highest id and the source's AUTOINCREMENT counter (ids of rows
// pruned since), and for the queue past every request id another table
// refers to, so no new id repeats an old one.
func (db *DB) moveSequences(ctx context.Context, src *DB) error {
	seqs := map[string]int64{}
	rows, err := src.r.DB.QueryContext(ctx, `SELECT name, seq FROM sqlite_sequence`)
	if err == nil {
		for rows.Next() {
			var name string
			var seq int64
			if rows.Scan(&name, &seq) == nil {
				seqs[name] = seq
			}
		}
		rows.Close()
	}
	rows, err = db.w.DB.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name = 'id' AND is_identity = 'YES' ORDER BY table_name`)
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	rows.Close()
	for _, t := range tables {
		floor := seqs[t]
		q := `SELECT COALESCE(MAX(id), 0) FROM ` + t
		if t == "queue" {
			q = `SELECT GREATEST((SELECT COALESCE(MAX(id), 0) FROM queue), (SELECT COALESCE(MAX(request_id), 0) FROM replies),
				(SELECT COALESCE(MAX(request_id), 0) FROM messages), (SELECT COALESCE(MAX(request_id), 0) FROM signals),
				(SELECT COALESCE(MAX(request_id), 0) FROM memories))`
		}
		var top int64
		if err := db.w.DB.QueryRowContext(ctx, q).Scan(&top); err != nil {
			return fmt.Errorf("copy: highest id of %s: %w", t, err)
		}
		top = max(top, floor)
		if top == 0 {
			continue
		}
		if _, err := db.w.DB.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'),
			GREATEST($2::bigint, COALESCE(pg_sequence_last_value(pg_get_serial_sequence($1, 'id')::regclass), 0)))`, t, top); err != nil {
			return fmt.Errorf("copy: move the id sequence of %s: %w", t, err)
		}
	}
	return nil
}

// RenameConversation gives the history of conversation from (its
// sessions, replies and usage rows) to conversation to, and returns how
// many sessions moved: `state migrate` gives a single machine's console
// history (console:local) to that machine's console among replicas
// (console:local:<replica>). When to has an active session already, the
// sessions of from join it as ended ones.
func (db *DB) RenameConversation(ctx context.Context, from, to string) (int64, error) {
	if from == to {
		return 0, nil
	}
	var moved int64
	err := db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET active = ?, ended_at = COALESCE(ended_at, ?) WHERE conversation = ? AND active
			AND EXISTS (SELECT 1 FROM sessions s WHERE s.conversation = ? AND s.active)`, false, db.ms(), from, to); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET conversation = ? WHERE conversation = ?`, to, from)
		if err != nil {
			return err
		}
		moved, _ = res.RowsAffected()
		for _, table := range []string{"replies", "usage"} {
			if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET conversation = ? WHERE conversation = ?`, to, from); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rename conversation %s to %s: %w", from, to, err)
	}
	return moved, nil
}

// checkNoClash refuses a copy that would drop rows of src: once gateways
// have written to both databases since an earlier copy (one went back to
// SQLite, or ran on it by mistake), both gave the same new ids to
// different rows, and a row the target has already is left as it is, so
// the source's would be lost while the run reported them as "there
// already". Rows are told apart by their creation time: these tables'
// rows carry an id and the time they were made, and one id with two
// times is two rows. These tables never give an id twice on one
// database (AUTOINCREMENT, or a newest row that is never deleted), so a
// source that alone went on writing never clashes. messages is left
// out: SQLite hands a message's id out again (a compaction's summary
// takes the id of the newest message it replaces; the newest messages
// of an expired session are deleted), and a divergence shows in the
// queue anyway, since every answer a gateway writes starts as a queued
// request.
func (db *DB) checkNoClash(ctx context.Context, src *DB) error {
	for _, table := range []string{"sessions", "replies", "queue", "memories", "schedules"} {
		q := `SELECT id, created_at FROM ` + table + ` ORDER BY id`
		sr, err := src.r.DB.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("copy: read %s of %s: %w", table, src.name, err)
		}
		tr, err := db.r.DB.QueryContext(ctx, q)
		if err != nil {
			sr.Close()
			return fmt.Errorf("copy: read %s of %s: %w", table, db.name, err)
		}
		n, first, err := clashes(sr, tr)
		sr.Close()
		tr.Close()
		if err != nil {
			return fmt.Errorf("copy: compare %s: %w", table, err)
		}
		if n > 0 {
			return CopyClashError{fmt.Sprintf("copy: %s already holds %d row(s) of %s under ids that %s uses for other rows (the first: id %d): "+
				"gateways have written to both since an earlier state migrate, and copying would drop the SQLite rows; nothing was copied. "+
				"To carry the SQLite database over whole, migrate into an empty PostgreSQL database (createdb, then point state.postgres.dsn at it), "+
				"which leaves out what was written to this one since: the two cannot be merged", db.name, n, table, src.name, first)}
		}
	}
	return nil
}

// CopyClashError is CopyFrom's refusal to copy into a database whose
// rows and the source's share ids (see checkNoClash): nothing was copied,
// and running it again does not help.
type CopyClashError struct{ msg string }

func (e CopyClashError) Error() string { return e.msg }

// clashes walks two (id, created_at) row sets in id order and counts the
// ids both have with different times; first is the lowest such id.
func clashes(a, b interface {
	Next() bool
	Scan(...any) error
	Err() error
}) (n int, first int64, err error) {
	type row struct{ id, at int64 }
	next := func(r interface {
		Next() bool
		Scan(...any) error
	}) (row, bool, error) {
		if !r.Next() {
			return row{}, false, nil
		}
		var x row
		err := r.Scan(&x.id, &x.at)
		return x, err == nil, err
	}
	x, okA, err := next(a)
	if err != nil {
		return 0, 0, err
	}
	y, okB, err := next(b)
	if err != nil {
		return 0, 0, err
	}
	for okA && okB {
		switch {
		case x.id < y.id:
			x, okA, err = next(a)
		case x.id > y.id:
			y, okB, err = next(b)
		default:
			if x.at != y.at {
				if n == 0 {
					first = x.id
				}
				n++
			}
			x, okA, err = next(a)
			if err == nil {
				y, okB, err = next(b)
			}
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if err := a.Err(); err != nil {
		return 0, 0, err
	}
	return n, first, b.Err()
}
