package plugins

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestSocketRootInTheDataDirectory(t *testing.T) {
	// No temporary directory, as in a scratch container.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	parent, err := os.MkdirTemp("/tmp", "otd-") // short enough for socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	log := slog.New(slog.DiscardHandler)

	live, err := newSocketRoot(parent, false, log)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(live.dir) != parent {
		t.Fatalf("root %s; want it in %s", live.dir, parent)
	}
	if fi, err := os.Stat(live.dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("root %s: %v %v; want mode 0700", live.dir, fi.Mode(), err)
	}
	// A crashed process's root: its lock file is there, nobody holds it.
	stale := filepath.Join(parent, socketRootPrefix+"stale")
	if err := os.MkdirAll(filepath.Join(stale, "p-1", "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, rootLockName), nil, 0o600)
	os.WriteFile(filepath.Join(stale, "p-1", "tmp", "big"), []byte("left behind"), 0o600)
	// Not a root: left alone.
	other := filepath.Join(parent, "media")
	os.Mkdir(other, 0o700)

	next, err := newSocketRoot(parent, false, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale root is still there: %v", err)
	}
	for _, keep := range []string{live.dir, other} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
	if err := next.remove(); err != nil {
		t.Fatal(err)
	}
	if err := live.remove(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("after remove, %s holds %v; want only media", parent, entries)
	}

	// Plugins as another user cannot pass through the private data
	// directory: the temporary directory is needed, and its absence (no
	// /tmp or /var/tmp either) is explained, as the operator's to fix.
	noFallbacks(t)
	_, err = newSocketRoot(parent, true, log)
	if err == nil || !strings.Contains(err.Error(), "TMPDIR") || !strings.Contains(err.Error(), "run_as") || core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("run_as without a temporary directory: %v (kind %v)", err, core.ErrorKind(err))
	}
}

// noFallbacks leaves $TMPDIR the only temporary directory for the test.
func noFallbacks(t *testing.T) {
	saved := tempFallbacks
	tempFallbacks = nil
	t.Cleanup(func() { tempFallbacks = saved })
}

// A TMPDIR that names no directory, or a path too long for sockets, is
// passed over for /tmp (here: a fallback directory) when the data
// directory cannot hold the sockets.
func TestSocketRootFallsBackFromAMissingTMPDIR(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	fallback, err := os.MkdirTemp("/tmp", "otf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(fallback) })
	saved := tempFallbacks
	tempFallbacks = []string{filepath.Join(fallback, "none"), fallback}
	t.Cleanup(func() { tempFallbacks = saved })

	// A missing TMPDIR short enough for socket paths, and a long one.
	for _, tmp := range []string{filepath.Join(fallback, "missing"), "/tmp/" + strings.Repeat("t", maxSocketParent)} {
		t.Setenv("TMPDIR", tmp)
		r, err := newSocketRoot("", true, log)
		if err != nil {
			t.Fatalf("TMPDIR %s: %v", tmp, err)
		}
		if filepath.Dir(r.dir) != fallback {
			t.Errorf("TMPDIR %s: root %s; want it in %s", tmp, r.dir, fallback)
		}
		r.remove()
	}
}

// CheckSocketRoot, which config check and doctor run, refuses what
// Manager.Start would refuse, and leaves nothing behind.
func TestCheckSocketRoot(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	noFallbacks(t)
	if err := CheckSocketRoot("/tmp/short", nil); err != nil {
		t.Errorf("a short data directory: %v", err)
	}
	long := "/tmp/" + strings.Repeat("d", maxSocketParent)
	err := CheckSocketRoot(long, nil)
	if err == nil || !strings.Contains(err.Error(), "too long") || !strings.Contains(err.Error(), "set TMPDIR") || core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("a long data directory without a temporary one: %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if err := CheckSocketRoot(long, nil); err != nil {
		t.Fatalf("a long data directory with TMPDIR: %v", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the check left %v in %s", entries, tmp)
	}
}

// TestTempSocketRootsAreSwept: in the temporary directory (plugins as
// another user), a root a crashed process left (its lock free) is
// removed at the next start, with the private binary copies in it; a
// running process's root, and one without a lock, stay.
func TestTempSocketRootsAreSwept(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	log := slog.New(slog.DiscardHandler)
	stale := filepath.Join(tmp, socketRootPrefix+"stale")
	unlocked := filepath.Join(tmp, socketRootPrefix+"nolock")
	for _, d := range []string{filepath.Join(stale, "bin-1"), unlocked} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stale, rootLockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := newSocketRoot("", true, log)
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the crashed process's root is still there: %v", err)
	}
	if _, err := os.Stat(unlocked); err != nil {
		t.Fatalf("a root without a lock was removed: %v", err)
	}
	next, err := newSocketRoot("", true, log)
	if err != nil {
		t.Fatal(err)
	}
	defer next.remove()
	if _, err := os.Stat(live.dir); err != nil {
		t.Fatalf("a running process's root was swept: %v", err)
	}
}
