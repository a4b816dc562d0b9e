package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/opentalon/opentalon/store"
)

// Issue 25 (lower): the backup is never readable by others, not even
// while it is written. With a permissive umask, SQLite creates the file
// VACUUM INTO writes as 0666; the store made it 0600 only at the end.
// The test watches the destination while a backup of a few MB is taken.
func TestBackupIsNeverReadableByOthers(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	db, err := store.Open(context.Background(), dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 40 {
		if err := db.LuaKVSet(context.Background(), "filler", fmt.Sprint(i), strings.Repeat("x", 60<<10)); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "backup.db")
	var mu sync.Mutex
	seen := map[fs.FileMode]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if fi, err := os.Stat(dst); err == nil {
				mu.Lock()
				seen[fi.Mode().Perm()] = true
				mu.Unlock()
			}
		}
	}()
	err = backupPrivately(context.Background(), db, dst)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode = %v, %v; want 0600", fi, err)
	}
	for mode := range seen {
		if mode&0o077 != 0 {
			t.Fatalf("the backup was %v while it was written", mode)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".opentalon-backup-*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if err := backupPrivately(context.Background(), db, dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second backup over it = %v; want a refusal", err)
	}
}
