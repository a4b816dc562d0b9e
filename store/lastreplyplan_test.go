package store

import (
	"context"
	"strings"
	"testing"
)

// TestLastReplyReadsItsIndex: a conversation's last reply (sweptIdle, on
// the way to a new session of a conversation the sweep emptied, or of a
// brand-new one) is one probe of replies_conversation_created on both
// engines. Without it, a planner reads every reply of the conversation
// (replies_conversation), or walks replies_created backwards until one of
// the conversation turns up, which for a conversation with none (SQLite
// chose that with few conversations) is every reply there is.
func TestLastReplyReadsItsIndex(t *testing.T) {
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
			// 20,000 replies in 2,000 conversations, the statistics gathered:
			// the planner has a choice to make.
			for _, q := range []string{
				`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
					INSERT INTO replies (conversation, text, parts, created_at) SELECT 'chat:' || (i % 2000), 'answer', '[]', i FROM n`,
				`ANALYZE`,
			} {
				if _, err := db.w.DB.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for _, conv := range []string{"chat:3", "chat:new"} {
				plan := explain(t, db, tc.explain+db.d.rebind(lastReplyAt), conv)
				if !strings.Contains(plan, "replies_conversation_created") {
					t.Errorf("the last reply of %s is not read by replies_conversation_created:\n%s", conv, plan)
				}
			}
		})
	}
}
