package store

import (
	"context"
	"strings"
	"testing"
)

// TestHistoryReadsSummariesByTheirIndex: the history's read finds a
// session's summaries through messages_summary (migration 181) on both
// engines, not by walking every entry of the session. The index is
// partial: a planner uses it only while the query's predicate matches the
// index's, and on SQLite only a literal `summary = TRUE` does
// (`summary = 1`, `summary` and `summary <> 0` fall back to
// messages_session), so a rewrite of the query would silently leave the
// index written and never read.
func TestHistoryReadsSummariesByTheirIndex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		open    func(testing.TB) *DB
		explain string
	}{
		{"sqlite", func(t testing.TB) *DB { return openTest(t, Options{}) }, `EXPLAIN QUERY PLAN `},
		{"postgres", func(t testing.TB) *DB { return openPG(t, Options{}) }, `EXPLAIN (COSTS OFF) `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.open(t)
			ctx := context.Background()
			// 40 sessions of 250 entries, one in 100 a summary: a planner
			// that knows the table (PostgreSQL's statistics) has a choice
			// to make.
			for _, q := range []string{
				`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40)
					INSERT INTO sessions (id, conversation, created_at, last_access) SELECT i, 'chat:' || i, 0, 0 FROM n`,
				`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
					INSERT INTO messages (session_id, role, content, summary, created_at) SELECT 1 + i % 40, 'user', 'hello', i % 100 = 0, 0 FROM n`,
			} {
				if _, err := db.w.DB.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if db.d.concurrent {
				if _, err := db.w.DB.ExecContext(ctx, `ANALYZE messages`); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range []struct {
				name string
				sql  string
				args []any
			}{
				{"History", `SELECT role, content, tool_calls, tool_call_id, attachments FROM ` + historyFrom(50) + ` ORDER BY id`, []any{7, 7}},
				{"HistoryAndMemories", `SELECT hm.has, h.role, h.content, h.tool_calls, h.tool_call_id, h.attachments FROM (SELECT ` + hasMemories + ` AS has) hm
					LEFT JOIN ` + historyFrom(50) + ` ON TRUE ORDER BY h.id`, []any{"telegram:42", 7, 7}},
			} {
				plan := explain(t, db, tc.explain+db.d.rebind(q.sql), q.args...)
				if !strings.Contains(plan, "messages_summary") {
					t.Errorf("%s's plan does not read messages_summary:\n%s", q.name, plan)
				}
			}
		})
	}
}

// explain is the plan of q, one line a step (the last column of each row:
// SQLite's detail, PostgreSQL's line).
func explain(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.w.DB.QueryContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		switch v := vals[len(vals)-1].(type) {
		case string:
			b.WriteString(v)
		case []byte:
			b.Write(v)
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
