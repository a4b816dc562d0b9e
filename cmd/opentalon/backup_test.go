package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// An operator who runs restore as root (sudo) on the service's data
// directory used to leave the database and the lock file root's: the
// gateway, run as the directory's owner, then failed to start (exit 78,
// which the unit does not restart). Root's files there are given to the
// directory's owner now.
func TestRestoreAsRootKeepsTheDataDirOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it checks what root's restore leaves behind")
	}
	ctx := context.Background()
	const owner = 65534 // nobody
	// A backup: a database this version made.
	src := t.TempDir()
	db, err := store.Open(ctx, src, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backup := filepath.Join(src, store.FileName)

	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, owner, owner); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("state: { data_dir: %q }\n", dir))
	if res := runMain(t, nil, "", "--config", cfg, "restore", backup); res.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, name := range []string{store.FileName, lockFileName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != owner || st.Gid != owner {
			t.Errorf("%s after root's restore belongs to %d:%d; want the data directory's owner %d:%d", name, st.Uid, st.Gid, owner, owner)
		}
	}
}

// restore used to accept any file SQLite opens: an empty one (a copy cut
// short) or another program's database became a fresh OpenTalon database
// and replaced the bot's. It refuses them now and changes nothing.
func TestRestoreRefusesWhatIsNoOpenTalonDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cfg := writeConfig(t, fmt.Sprintf("state: { data_dir: %q }\n", dir))
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	odb, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := odb.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	odb.Close()
	for _, file := range []string{empty, other} {
		res := runMain(t, nil, "", "--config", cfg, "restore", file)
		if res.code != 1 || !strings.Contains(res.stderr, "not a usable OpenTalon database: it has no schema_migrations table") || !strings.Contains(res.stderr, "nothing was changed") {
			t.Errorf("restore %s: exit %d\n%s%s; want a refusal", filepath.Base(file), res.code, res.stdout, res.stderr)
		}
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, store.FileName+".before-restore-*")); len(kept) != 0 {
		t.Fatalf("the database was moved aside: %v", kept)
	}
}

// Two restores within one second shared the name of the copy kept aside,
// so the second renamed the first one's database over it: the database
// from before both was lost. Each keeps its own now.
func TestRestoreNeverOverwritesADatabaseKeptAside(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := copyFile(filepath.Join(dir, store.FileName), backup); err != nil {
		t.Fatal(err)
	}
	// Earlier restores' copies under every name this one could pick in
	// the next minute.
	now := time.Now().UTC()
	cur := filepath.Join(dir, store.FileName)
	var earlier []string
	for s := range 60 {
		name := cur + ".before-restore-" + now.Add(time.Duration(s)*time.Second).Format("20060102T150405Z")
		if err := os.WriteFile(name, []byte("kept by an earlier restore"), 0o600); err != nil {
			t.Fatal(err)
		}
		earlier = append(earlier, name)
	}
	cfg := writeConfig(t, fmt.Sprintf("state: { data_dir: %q }\n", dir))
	if res := runMain(t, nil, "", "--config", cfg, "restore", backup); res.code != 0 || !strings.Contains(res.stdout, "the previous database is kept as") {
		t.Fatalf("restore: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	kept, _ := filepath.Glob(cur + ".before-restore-*")
	if len(kept) != 61 {
		t.Fatalf("%d copies kept aside; want the 60 earlier ones and this restore's", len(kept))
	}
	for _, k := range earlier {
		if b, err := os.ReadFile(k); err != nil || string(b) != "kept by an earlier restore" {
			t.Fatalf("%s was overwritten (%d bytes, %v)", filepath.Base(k), len(b), err)
		}
	}
}
