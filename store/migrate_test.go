package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestMigrationsFromEveryEarlierSchema: a database left at any earlier
// schema version (each prefix of the migrations), with a message waiting
// and one left running by a crash, opens with this release: the schema
// is brought up to date, the waiting message is claimed in order, the
// interrupted one first and counted as an interruption.
func TestMigrationsFromEveryEarlierSchema(t *testing.T) {
	ms, err := loadMigrations("migrations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range ms[:len(ms)-1] {
		prefix := ms[:i+1]
		t.Run(prefix[len(prefix)-1].name, func(t *testing.T) {
			path := t.TempDir() + "/" + FileName
			old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
			if err != nil {
				t.Fatal(err)
			}
			must := func(q string, args ...any) {
				t.Helper()
				if _, err := old.Exec(q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			must(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
			for _, m := range prefix {
				must(scriptOf(t, m))
				must(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.version, m.name)
			}
			payload := func(id string) string {
				return fmt.Sprintf(`{"message":{"Conversation":{"Channel":"chat","Chat":"a"},"MessageID":%q,"Text":"m%s"}}`, id, id)
			}
			must(`INSERT INTO queue (id, dedupe_key, kind, conversation, payload, status, created_at, updated_at) VALUES (1, 'chat:m:1', 'message', 'chat:a', ?, 'running', 0, 0)`, payload("1"))
			must(`INSERT INTO queue (id, dedupe_key, kind, conversation, payload, created_at, updated_at) VALUES (2, 'chat:m:2', 'message', 'chat:a', ?, 0, 0)`, payload("2"))
			must(`INSERT INTO sessions (conversation, created_at, last_access) VALUES ('chat:a', 0, 0)`)
			old.Close()

			db, err := OpenFile(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v, _ := db.SchemaVersion(ctx); v != ms[len(ms)-1].version {
				t.Fatalf("schema version %d, want %d", v, ms[len(ms)-1].version)
			}
			if problems, err := db.QuickCheck(ctx); err != nil || len(problems) > 0 {
				t.Fatalf("quick check: %v %v", problems, err)
			}
			first, _, err := db.Claim(ctx, 5, time.Now())
			if err != nil || len(first) != 1 || first[0].ID != 1 || first[0].Interruptions != 1 {
				t.Fatalf("first claim = %+v, %v; want the interrupted message, counted", first, err)
			}
			if err := db.Finish(ctx, 1, first[0].Lease, core.StatusDone, ""); err != nil {
				t.Fatal(err)
			}
			next, _, err := db.Claim(ctx, 5, time.Now())
			if err != nil || len(next) != 1 || next[0].Message.Text != "m2" {
				t.Fatalf("second claim = %+v, %v", next, err)
			}
			if s, err := db.ActiveSession(ctx, core.ConversationKey{Channel: "chat", Chat: "a"}); err != nil || s.ID != 1 {
				t.Fatalf("the old session = %+v, %v; want it found (its partial index was re-created)", s, err)
			}
		})
	}
}

// scriptOf is m's SQL.
func scriptOf(t testing.TB, m migration) string {
	t.Helper()
	s, err := m.script()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFewerPagesMigration: a database at schema 170 with sent parts
// keeps them, every column of every row, through migration 180, which
// rebuilds deliveries as a WITHOUT ROWID table and drops signals_at, and
// 181, which adds messages_summary.
func TestFewerPagesMigration(t *testing.T) {
	ms, err := loadMigrations("migrations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := t.TempDir() + "/" + FileName
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	must := func(q string, args ...any) {
		t.Helper()
		if _, err := old.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	must(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.version > 170 {
			break
		}
		must(scriptOf(t, m))
		must(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.version, m.name)
	}
	must(`INSERT INTO sessions (id, conversation, created_at, last_access) VALUES (1, 'chat:a', 0, 0)`)
	must(`INSERT INTO replies (id, request_id, session_id, conversation, text, parts, created_at) VALUES (7, 3, 1, 'chat:a', 'ab', '["a","b"]', 0)`)
	must(`INSERT INTO deliveries (reply_id, part, channel, platform_id, sent_at, draft) VALUES (7, 0, 'chat', 'p0', 5, 0), (7, 1, 'chat', 'p1', 6, 1)`)
	must(`INSERT INTO signals (at, kind, polarity, reply_id) VALUES (1, 'reaction', 1, 7)`)
	rowsBefore := deliveryRows(t, old)
	old.Close()

	db, err := OpenFile(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.ReplyByPlatformID(ctx, "chat", "p1")
	if err != nil || r == nil || r.ID != 7 || len(r.Sent) != 2 || r.Sent[0] != "p0" || r.Sent[1] != "p1" || r.Draft[0] || !r.Draft[1] {
		t.Fatalf("ReplyByPlatformID = %+v, %v; want reply 7 with both parts (the second a draft)", r, err)
	}
	if got := deliveryRows(t, db.r.DB); got != rowsBefore {
		t.Fatalf("deliveries after the migrations:\n%s\nbefore:\n%s", got, rowsBefore)
	}
	var ddl string
	if err := db.r.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'deliveries'`).Scan(&ddl); err != nil || !strings.Contains(ddl, "WITHOUT ROWID") {
		t.Fatalf("deliveries = %q, %v; want a WITHOUT ROWID table", ddl, err)
	}
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('signals_at', 'deliveries_platform', 'messages_summary')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of signals_at, deliveries_platform, messages_summary (%v); want the last two", n, err)
	}
	if problems, err := db.QuickCheck(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("quick check: %v %v", problems, err)
	}
	// The reply's deliveries still go with it.
	if _, err := db.w.ExecContext(ctx, `DELETE FROM replies WHERE id = 7`); err != nil {
		t.Fatal(err)
	}
	if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d deliveries left after their reply was deleted (%v); want none", n, err)
	}
}

// deliveryRows are the rows of deliveries, every column, in key order.
func deliveryRows(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT reply_id, part, channel, platform_id, sent_at, draft FROM deliveries ORDER BY reply_id, part`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var reply, part, sent, draft int64
		var channel, pid string
		if err := rows.Scan(&reply, &part, &channel, &pid, &sent, &draft); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d %d %s %s %d %d\n", reply, part, channel, pid, sent, draft)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
