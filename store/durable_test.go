package store

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestEnqueueCommitsDurably: the enqueue's insert runs with
// synchronous=FULL (its commit is on disk before the platform is
// acknowledged), and the writer is back to NORMAL afterwards.
func TestEnqueueCommitsDurably(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	// A trigger records the writer's synchronous level as the row goes in.
	for _, q := range []string{
		`CREATE TABLE sync_seen (level INTEGER)`,
		`CREATE TRIGGER record_sync AFTER INSERT ON queue BEGIN INSERT INTO sync_seen SELECT synchronous FROM pragma_synchronous; END`,
	} {
		if _, err := db.w.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := db.Enqueue(ctx, msgItem(core.ConversationKey{Channel: "telegram", Chat: "1"}, "1", "hi")); err != nil {
		t.Fatal(err)
	}
	var level int
	if err := db.w.DB.QueryRowContext(ctx, `SELECT level FROM sync_seen`).Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != 2 {
		t.Fatalf("enqueue committed with synchronous=%d, want 2 (FULL)", level)
	}
	if err := db.w.DB.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level); err != nil || level != 1 {
		t.Fatalf("writer after the enqueue: synchronous=%d (%v), want 1 (NORMAL)", level, err)
	}
}
