package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// cmdBackup implements `opentalon backup FILE`: a consistent copy of the
// database (VACUUM INTO, one read transaction), taken while the gateway
// runs or not. FILE must not exist.
func cmdBackup(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	rest, err := parseSub("backup", g, args, io, nil)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return argCountError("backup", rest, 1, "FILE", "usage: opentalon backup FILE (a new file to write the copy to)")
	}
	cfg, err := loadConfigFor(g, env, "state")
	if err != nil {
		return err
	}
	if cfg.State.Driver == config.DriverPostgres {
		return pgDump(ctx, cfg, rest[0], io, env)
	}
	path := filepath.Join(cfg.State.DataDir, store.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s (state.data_dir): nothing to back up", path)
	}
	db, err := store.OpenFile(ctx, path, store.Options{Logger: log})
	if err != nil {
		return err
	}
	defer db.Close()
	t0 := time.Now()
	if err := backupPrivately(ctx, db, rest[0]); err != nil {
		return err
	}
	size := int64(0)
	if fi, err := os.Stat(rest[0]); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(io.Out, "backed up %s to %s (%s in %s)\n", path, rest[0], humanBytes(size), time.Since(t0).Round(time.Millisecond))
	return nil
}

// backupPrivately writes the backup of db to dst without it ever being
// readable by others: SQLite creates the file VACUUM INTO writes with the
// umask's mode (0644 on most systems) and the store makes it 0600 only at
// the end, so the copy (every conversation) was readable meanwhile. The
// copy is written in a directory only this user may enter, made next to
// dst, and linked to dst once it is 0600.
func backupPrivately(ctx context.Context, db *store.DB, dst string) error {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	if _, err := os.Lstat(abs); err == nil {
		return core.Errorf(core.KindInvalid, "backup: %s already exists; name a new file", abs)
	}
	dir, err := os.MkdirTemp(filepath.Dir(abs), ".opentalon-backup-")
	if err != nil {
		return fmt.Errorf("backup to %s: %w", abs, err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "backup.db")
	if err := db.Backup(ctx, tmp); err != nil {
		return err
	}
	if err := os.Link(tmp, abs); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return core.Errorf(core.KindInvalid, "backup: %s already exists; name a new file", abs)
		}
		return fmt.Errorf("backup to %s: %w", abs, err)
	}
	return nil
}

// cmdRestore implements `opentalon restore FILE`: it checks that FILE is
// a sound OpenTalon database, keeps the current one aside and puts the
// backup in its place. It refuses while a gateway holds the data
// directory's lock, and holds that lock itself while it works.
func cmdRestore(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	rest, err := parseSub("restore", g, args, io, nil)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return argCountError("restore", rest, 1, "FILE", "usage: opentalon restore FILE (a file written by opentalon backup)")
	}
	src := rest[0]
	if fi, err := os.Stat(src); err != nil {
		return fmt.Errorf("restore: %w", err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("restore: %s is not a file", src)
	}
	cfg, err := loadConfigFor(g, env, "state")
	if err != nil {
		return err
	}
	if cfg.State.Driver == config.DriverPostgres {
		return fmt.Errorf("restore replaces the SQLite file of state.driver: sqlite; a PostgreSQL database (state.driver: postgres) is restored with %s (stop the gateways first)", pgRestoreHint(src))
	}
	dir := cfg.State.DataDir
	lock, err := lockDataDir(dir)
	if err != nil {
		return fmt.Errorf("restore refused: %w", err)
	}
	defer lock.release()

	// The backup is checked on a copy beside the database (opening it
	// may migrate it to this version; the file given stays as it is).
	stamp := time.Now().UTC().Format("20060102T150405Z")
	tmp := filepath.Join(dir, ".restore-"+stamp+".db")
	if err := copyFile(src, tmp); err != nil {
		return fmt.Errorf("restore: copy %s: %w", src, err)
	}
	defer removeDB(tmp)
	if err := isOpenTalonDB(ctx, tmp); err != nil {
		return fmt.Errorf("restore: %s is not a usable OpenTalon database: %w; nothing was changed (name a file opentalon backup wrote)", src, err)
	}
	db, err := store.OpenFile(ctx, tmp, store.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("restore: %s is not a usable OpenTalon database: %w", src, err)
	}
	probs, err := db.QuickCheck(ctx)
	db.Close()
	if err != nil || len(probs) > 0 {
		return fmt.Errorf("restore: %s fails PRAGMA quick_check (%v %v); nothing was changed", src, err, probs)
	}

	// Restored by root (sudo), the database would be root's and the
	// gateway, run as the directory's owner, could not open it.
	// The file is opened without following a link: the directory's
	// owner may have put one in its place meanwhile.
	if uid, gid, ok := dirOwner(dir); ok {
		f, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err == nil {
			err = chownOwn(f, uid, gid)
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("restore: give the restored database %s to %s's owner: %w; nothing was changed", tmp, dir, err)
		}
	}
	cur := filepath.Join(dir, store.FileName)
	// Two restores within a second would share the stamp, and the second
	// would rename over the database the first kept aside.
	aside := freeName(cur + ".before-restore-" + stamp)
	kept := false
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if _, err := os.Stat(cur + suffix); err == nil {
			if err := os.Rename(cur+suffix, aside+suffix); err != nil {
				return fmt.Errorf("restore: keep the current database aside: %w", err)
			}
			kept = kept || suffix == ""
		}
	}
	if err := os.Rename(tmp, cur); err != nil {
		return fmt.Errorf("restore: put the backup in place (the previous database is %s): %w", aside, err)
	}
	fmt.Fprintf(io.Out, "restored %s into %s\n", src, cur)
	if kept {
		fmt.Fprintf(io.Out, "the previous database is kept as %s\n", aside)
	}
	return nil
}

// isOpenTalonDB says why the SQLite file at path is not a database
// OpenTalon made (nil when it is): opening an empty file, or another
// program's database, would make it one — without a row of the bot's —
// and restore would put that in place of the real one.
func isOpenTalonDB(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("it has no schema_migrations table (an empty file, or another program's database)")
	}
	return nil
}

// freeName is name, or name-2, name-3, ... : the first that is not there
// with its -wal and -shm files.
func freeName(name string) string {
	for i := 1; ; i++ {
		n := name
		if i > 1 {
			n = fmt.Sprintf("%s-%d", name, i)
		}
		taken := false
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if _, err := os.Lstat(n + suffix); err == nil {
				taken = true
			}
		}
		if !taken {
			return n
		}
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}

// removeDB removes a database file and its WAL and shared-memory files.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}
