package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// lockFileName is the file in the data directory that `opentalon run`
// holds an exclusive lock on, with its PID inside.
const lockFileName = "opentalon.lock"

// pruneEvery is how often finished queue rows past state.retention are
// pruned while the gateway runs (start-up prunes too).
const pruneEvery = time.Hour

// buildRunApp is BuildApp for `opentalon run`: it first takes the data
// directory's lock, so a second gateway on the same data_dir exits
// instead of taking over the first one's in-flight requests, and it
// prunes finished queue rows periodically while the app lives. Both end
// with the app's Close.
func buildRunApp(ctx context.Context, cfg *config.Config, o AppOptions) (*App, error) {
	return buildLockedApp(ctx, cfg, o, pruneEvery)
}

func buildLockedApp(ctx context.Context, cfg *config.Config, o AppOptions, every time.Duration) (*App, error) {
	lock, err := lockDataDir(cfg.State.DataDir)
	if err != nil {
		if errors.As(err, new(dataDirBusy)) {
			// A gateway (not restore or state migrate, whose database
			// is this one) may also run beside it on a directory of
			// its own.
			return nil, fmt.Errorf("%w, or give this one another state.data_dir", err)
		}
		return nil, err
	}
	app, err := BuildApp(ctx, cfg, o)
	if err != nil {
		lock.release()
		return nil, err
	}
	// Closers run in reverse: the pruner stops before the store closes,
	// and the lock goes last.
	app.closers = append([]func() error{lock.release}, app.closers...)
	// The pruner runs under the maintenance lease (Run).
	app.pruneEvery = every
	return app, nil
}

// dataDirLock is an exclusive flock(2) on <data_dir>/opentalon.lock. The
// kernel drops it when the process ends, however it ends, so a crash
// leaves no stale lock behind.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the data directory's lock or says which process
// holds it.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := makeDataDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockFileName)
	// Never through a link: the directory's owner may make the lock file
	// one to any file, and root (a command run with sudo) would write
	// the PID into that file and give it to the owner.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("open lock file %s (state.data_dir): it is a symbolic link; opentalon makes it itself: remove it (rm %s) and start again", path, path)
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("open lock file %s (state.data_dir): %w; the data directory and its files must belong to the user opentalon runs as "+
			"(a command run as root may have made them root's): chown -R USER %s, with the user the gateway runs as", path, err, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file %s (state.data_dir): %w", path, err)
	}
	// Made by root (restore, state migrate, affinity reset run with
	// sudo), the file would be root's, and the gateway, run as the
	// directory's owner, could not start again.
	if uid, gid, ok := dirOwner(dir); ok {
		if err := chownOwn(f, uid, gid); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock file %s (state.data_dir): %w", path, err)
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					holder = fmt.Sprintf("PID %d", pid)
				}
			}
			return nil, dataDirBusy{fmt.Sprintf("another opentalon instance (%s) is running on state.data_dir %s (it holds %s); stop it first", holder, dir, path)}
		}
		return nil, fmt.Errorf("lock %s (state.data_dir): %w", path, err)
	}
	// The PID only names the holder in the message above; the lock holds
	// without it.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// dirOwner is the owner of dir when this process runs as root and dir
// belongs to another user (the service's): the files root makes there
// are given to that user, so the gateway, run as it, may open them.
func dirOwner(dir string) (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, false
	}
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	if !isUnix || st.Uid == 0 {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// chownOwn gives the file f, which root opened in a data directory of
// another user's, to that user (uid, gid). It refuses a file with other
// names too (a hard link the directory's owner made to a file of
// root's, say) and anything but a regular file: giving those away would
// hand the owner files that are not the data directory's.
func chownOwn(f *os.File, uid, gid int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || st.Nlink != 1 {
		return fmt.Errorf("not given to the data directory's owner (uid %d): it is no regular file with one name; remove it and run the command again", uid)
	}
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("give it to the data directory's owner (uid %d): %w", uid, err)
	}
	return nil
}

// dataDirBusy is lockDataDir's error when another process holds the lock.
type dataDirBusy struct{ msg string }

func (e dataDirBusy) Error() string { return e.msg }

// release empties the PID and drops the lock.
func (l *dataDirLock) release() error {
	_ = l.f.Truncate(0)
	// Unlocked before the close: a child being started elsewhere in this
	// process (between its fork and its exec) shares the descriptor, and
	// a close alone would leave it holding the lock for that moment.
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}

// startPrunerCtx deletes finished queue rows past state.retention, and
// the sealed short-lived credentials that expired, every interval until
// ctx ends or the returned stop is called.
func startPrunerCtx(ctx context.Context, db *store.DB, every time.Duration, log *slog.Logger) (stop func()) {
	return runEvery(ctx, every, true, func(ctx context.Context) {
		n, err := db.PruneQueue(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("prune finished queue rows", "err", err)
		case n > 0:
			log.Info("pruned finished queue rows past state.retention", "rows", n)
		}
		if n, err := db.SweepSealed(ctx, time.Now()); err != nil && ctx.Err() == nil {
			log.Warn("delete expired platform credentials", "err", err)
		} else if n > 0 {
			log.Debug("deleted expired platform credentials", "rows", n)
		}
	})
}

// dataDirUsable says why `run` could not use dir as its data directory,
// nil when it can. A directory that does not exist yet is judged by the
// nearest one above it, where run would create it. The error wraps
// syscall.ENOTDIR when the path can work for no one (a file where a
// directory must be), and the cause of the failed write otherwise (this
// user may not write there). It leaves nothing behind.
func dataDirUsable(dir string) error {
	at, missing := filepath.Clean(dir), false
	for {
		fi, err := os.Stat(at)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("%s is a file, not a directory: %w", at, syscall.ENOTDIR)
		case err == nil:
			probe, err := os.MkdirTemp(at, ".opentalon-probe-")
			if err != nil {
				if missing {
					return fmt.Errorf("%s does not exist and cannot be created in %s: %w", dir, at, err)
				}
				return fmt.Errorf("%s is not writable: %w", at, err)
			}
			os.Remove(probe)
			return nil
		case errors.Is(err, syscall.ENOTDIR), errors.Is(err, fs.ErrNotExist):
			// ENOTDIR: a file further up; the walk finds it.
			up := filepath.Dir(at)
			if up == at {
				return err
			}
			at, missing = up, true
		default:
			return err
		}
	}
}

// makeDataDir creates the data directory dir (0700) if it is missing,
// saying what to fix when it cannot.
func makeDataDir(dir string) error {
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		return nil
	}
	if uerr := dataDirUsable(dir); errors.Is(uerr, syscall.ENOTDIR) {
		return dataDirNotDir(uerr)
	}
	return fmt.Errorf("create data directory %s (state.data_dir): %w", dir, err)
}

// dataDirNotDir is the refusal of a state.data_dir whose path runs
// through a file (dataDirUsable's ENOTDIR): `run` and `config check`
// say the same.
func dataDirNotDir(err error) error {
	return core.Errorf(core.KindInvalid, "state.data_dir: %w; set it to a directory", err)
}
