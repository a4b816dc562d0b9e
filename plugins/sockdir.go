package plugins

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/opentalon/opentalon/core"
)

// maxSocketParent is the longest parent directory the socket root is made
// in: a unix socket path holds at most 107 bytes, and below the parent
// come otp-<10>/p-<10>/plugin.sock.
const maxSocketParent = 60

// socketRootPrefix names the socket roots; rootLockName is the file in
// each that its process holds an exclusive flock on while it runs.
const (
	socketRootPrefix = "otp-"
	rootLockName     = ".lock"
)

// socketRoot is the directory the plugins' private directories (their
// sockets and TMPDIR) are made in.
type socketRoot struct {
	dir string
	// lock is flocked while the root is in use, so a later process can
	// tell a root a crash left behind.
	lock *os.File
}

// newSocketRoot makes the socket root. With parent (the data directory)
// set, it is made there: the temporary directory may not exist (a
// scratch container has no /tmp) and may be shared. Roots a crashed
// process left in parent are removed first. Plugins that run as another
// user cannot pass through a private data directory, so for them, or
// when parent is too long for socket paths, the root is made in the
// temporary directory.
func newSocketRoot(parent string, otherUser bool, log *slog.Logger) (*socketRoot, error) {
	if parent != "" && !otherUser && len(parent) <= maxSocketParent {
		sweepSocketRoots(parent, log)
		dir, err := os.MkdirTemp(parent, socketRootPrefix)
		if err != nil {
			return nil, fmt.Errorf("create the plugin socket directory in %s (state.data_dir): %w", parent, err)
		}
		r := &socketRoot{dir: dir}
		if r.lock, err = lockRoot(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		return r, os.Chmod(dir, 0o700)
	}
	// The temporary directory is shared: only this user's roots that no
	// running process holds are swept (with run_as they hold the private
	// copies of plugin binaries, see stageBinary).
	tmp := tempSocketParent()
	if tmp != os.TempDir() {
		log.Info("the temporary directory cannot hold the plugins' sockets (not a directory, or too long a path); using another", "TMPDIR", os.TempDir(), "dir", tmp)
	}
	sweepSocketRoots(tmp, log)
	return tempSocketRoot(parent, otherUser)
}

// tempSocketRoot makes the socket root in the temporary directory
// (tempSocketParent), for plugins that run as another user or a parent
// too long for socket paths; the error says why the temporary directory
// is needed and the fix.
func tempSocketRoot(parent string, otherUser bool) (*socketRoot, error) {
	dir, err := SocketRoot(otherUser)
	if err != nil {
		why := "plugins.tools.run_as runs plugins as another user, who cannot pass through the private state.data_dir"
		if !otherUser {
			why = fmt.Sprintf("state.data_dir %s is too long for unix socket paths (over %d bytes)", parent, maxSocketParent)
		}
		// The operator's to fix: restarting cannot get past it (run
		// exits with the status a service manager does not restart on).
		return nil, core.Errorf(core.KindInvalid, "%w; %s, so the sockets go to the temporary directory: set TMPDIR to a short existing directory", err, why)
	}
	r := &socketRoot{dir: dir}
	if r.lock, err = lockRoot(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// lockRoot creates dir's lock file and holds an exclusive flock on it;
// the kernel drops it when the process ends, however it ends. The file
// is locked under another name and then renamed into place, so a sweep
// (another process's) never finds the lock file free while it is new.
func lockRoot(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, rootLockName+"-")
	if err != nil {
		return nil, fmt.Errorf("create the plugin socket directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the plugin socket directory %s: %w", dir, err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, rootLockName)); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the plugin socket directory %s: %w", dir, err)
	}
	return f, nil
}

// sweepSocketRoots removes the socket roots in parent whose lock nobody
// holds: a process that crashed left them, with its plugins' temporary
// files.
func sweepSocketRoots(parent string, log *slog.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), socketRootPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if uid, ok := ownerOf(dir); !ok || uid != uint32(os.Geteuid()) {
			continue // another user's, in a shared directory
		}
		f, err := os.OpenFile(filepath.Join(dir, rootLockName), os.O_RDWR, 0)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				log.Warn("cannot check a plugin socket directory left behind", "dir", dir, "err", err)
			}
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("remove a plugin socket directory a stopped process left", "dir", dir, "err", err)
			} else {
				log.Info("removed a plugin socket directory a stopped process left", "dir", dir)
			}
		}
		f.Close()
	}
}

// remove deletes the root and drops its lock.
func (r *socketRoot) remove() error {
	err := os.RemoveAll(r.dir)
	if r.lock != nil {
		r.lock.Close()
	}
	return err
}

// CheckSocketRoot reports whether the directory for the plugins' sockets
// that Manager.Start makes can be made, without starting anything: in
// parent (the data directory, which run creates) when plugins run as
// the core's user and parent is short enough, else in the temporary
// directory, where a root is made and removed again. iso is the
// plugins' isolation (nil = the core's own user). config check and
// doctor run it, so they refuse what run would refuse.
func CheckSocketRoot(parent string, iso *Isolation) error {
	otherUser := iso.credential() != nil
	if parent != "" && !otherUser && len(parent) <= maxSocketParent {
		return nil
	}
	r, err := tempSocketRoot(parent, otherUser)
	if err != nil {
		return err
	}
	return r.remove()
}
