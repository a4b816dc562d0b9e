package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
		return db.files.sync(path)
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

// TestFileSyncerKeepsTheFileWhileThePathNamesIt: the syncer opens a file
// once and flushes it through the kept descriptor; when the path names a
// new file (the log was deleted and made again), it flushes the new one;
// a missing file is an error.
func TestFileSyncerKeepsTheFileWhileThePathNamesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	var s fileSyncer
	defer s.close()
	if err := s.sync(path); err != nil {
		t.Fatalf("sync: %v", err)
	}
	first := s.files[path].f
	if err := s.sync(path); err != nil || s.files[path].f != first {
		t.Fatalf("second sync: %v; kept file changed: %v", err, s.files[path].f != first)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(path); err == nil {
		t.Fatal("sync of a deleted file succeeded")
	}
	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(path); err != nil {
		t.Fatalf("sync of the new file: %v", err)
	}
	k := s.files[path]
	if k.f == first {
		t.Fatal("the new file was flushed through the old file's descriptor")
	}
	if fi, err := k.f.Stat(); err != nil || fi.Size() != 3 {
		t.Fatalf("kept file: %v %v", fi, err)
	}
}
