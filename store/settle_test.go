package store

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestANewDatabaseWritesNothingUntilItSettles: a database made from the
// schema's image is opened without a write (its log, whose creation
// syncs the disk twice, stays empty); Settle dates its migrations, and
// a database left undated by a process that stopped first is dated by
// the next one's Settle.
func TestANewDatabaseWritesNothingUntilItSettles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	db, err := OpenFile(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("the new database's log holds %d bytes before Settle; want nothing written", fi.Size())
	}
	undated := func() string {
		return strings.Join(queryStrings(t, openRaw(t, path), `SELECT count(*) FROM schema_migrations WHERE applied_at = 0`), "")
	}
	if undated() == "0" {
		t.Fatal("the migrations were dated at the open; want them left to Settle")
	}
	if err := db.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := undated(); n != "0" {
		t.Fatalf("%s migrations undated after Settle", n)
	}

	// A process that stopped before Settle (killed: its Close never ran).
	path2 := filepath.Join(t.TempDir(), FileName)
	killed, err := OpenFile(ctx, path2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	killed.undated.Store(false) // as if it never got to it
	killed.Close()
	next, err := OpenFile(ctx, path2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := next.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := queryStrings(t, openRaw(t, path2), `SELECT count(*) FROM schema_migrations WHERE applied_at = 0`); strings.Join(got, "") != "0" {
		t.Fatalf("%v migrations undated after the next process's Settle", got)
	}
}

// TestAFreshDatabasesFirstFlushWaitsForItsName: the sync of a new
// database's name in its directory runs beside the start, but an
// enqueue (the platform is acknowledged when it returns) waits for it:
// its log is flushed only once the database itself will be there after
// a power cut.
func TestAFreshDatabasesFirstFlushWaitsForItsName(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	release := make(chan struct{})
	var dirSynced, released bool
	syncing := make(chan string, 1)
	db, err := OpenFile(ctx, filepath.Join(dir, FileName), Options{syncDir: func(d string) error {
		syncing <- d
		<-release
		dirSynced = true
		return syncDirectory(d)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	defer func() {
		if !released {
			close(release) // a failed test's Close waits for the sync
		}
	}()
	if d := <-syncing; d != dir {
		t.Fatalf("synced directory %q; want the data directory %q", d, dir)
	}
	walSynced := make(chan bool, 1)
	db.syncFile = func(path string) error {
		walSynced <- dirSynced
		return db.files.sync(path)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := db.Enqueue(ctx, msgItem(core.ConversationKey{Channel: "telegram", Chat: "1"}, "1", "hi"))
		done <- err
	}()
	// The enqueue either flushes its log (too soon: the directory is not
	// synced) or waits for the directory's sync.
	for !released {
		select {
		case ok := <-walSynced:
			if !ok {
				t.Fatal("the enqueue flushed its log before the new database's name was synced")
			}
		case err := <-done:
			t.Fatalf("the enqueue returned (%v) before the new database's name was synced", err)
		default:
			if waitingForName() {
				close(release)
				released = true
				continue
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !<-walSynced {
		t.Fatal("the log was flushed before the directory was synced")
	}
}

// waitingForName says a goroutine waits in nameSync.wait.
func waitingForName() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*nameSync).wait")
}
