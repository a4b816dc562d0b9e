package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestEnqueueCommitsDurably: the enqueue's commit is flushed to the disk
// before Enqueue returns (the platform is acknowledged after it): the
// write-ahead log is synced once the row is committed, and a failed sync
// fails the enqueue, so the platform delivers the message again.
func TestEnqueueCommitsDurably(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	var synced []string
	committed := -1
	db.syncFile = func(path string) error {
		synced = append(synced, path)
		// The row must be committed by the time its log is flushed: a
		// reader of the other pool sees it.
		if err := db.r.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM queue WHERE dedupe_key = 'telegram:m:1'`).Scan(&committed); err != nil {
			t.Errorf("read the queue during the sync: %v", err)
		}
		return fsync(path)
	}
	if _, _, err := db.Enqueue(ctx, msgItem(conv, "1", "hi")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || !strings.HasSuffix(synced[0], FileName+"-wal") {
		t.Fatalf("synced %q; want the database's write-ahead log once", synced)
	}
	if committed != 1 {
		t.Fatalf("%d rows committed when the log was flushed; want the enqueued one", committed)
	}

	// A sync that fails fails the enqueue.
	db.syncFile = func(string) error { return errors.New("I/O error") }
	if _, _, err := db.Enqueue(ctx, msgItem(conv, "2", "again")); err == nil || !strings.Contains(err.Error(), "write-ahead log") {
		t.Fatalf("enqueue with a failing sync: %v; want an error naming the log", err)
	}
}
