package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestBackgroundCheckpoint: the write-ahead log reaches the database file
// without the writer's own checkpoint (its threshold is far away): after
// enough write transactions the background one copies it, so a copy of
// the database file alone, without its log, holds the rows.
func TestBackgroundCheckpoint(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	n := 2 * ckptEvery
	for i := range n {
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "hi")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := rowsInFileAlone(t, db.Path())
		if got >= ckptEvery {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file alone holds %d of %d enqueued rows after %d write transactions; want at least %d (the background checkpoint did not run)",
				got, n, n, ckptEvery)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Closing stops it (and must not hang).
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// rowsInFileAlone counts the queue rows in a copy of the database file
// made without its write-ahead log.
func rowsInFileAlone(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := sql.Open("sqlite", "file:"+cp+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got int
	if err := c.QueryRow(`SELECT COUNT(*) FROM queue`).Scan(&got); err != nil {
		return 0 // the table is not in the file yet
	}
	return got
}

// TestWriteAheadLogStaysBounded: under a steady stream of writes the log
// is started over after each background checkpoint (it ends on the
// writer's connection, where no write comes in between), so it does not
// grow with the number of writes. Without that last pass the log of
// 4,000 enqueues is over 20,000 pages.
func TestWriteAheadLogStaysBounded(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, Options{})
	db.syncFile = func(string) error { return nil } // durability is not what is tested
	conv := core.ConversationKey{Channel: "telegram", Chat: "1"}
	const n = 4000
	for i := range n {
		if _, _, err := db.Enqueue(ctx, msgItem(conv, fmt.Sprint(i), "hi")); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(db.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	const bound = 16 << 20
	if fi.Size() > bound {
		t.Fatalf("the write-ahead log is %d MiB after %d enqueues; want it under %d MiB (started over after each checkpoint)",
			fi.Size()>>20, n, bound>>20)
	}
}
