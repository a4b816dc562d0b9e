package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestFinishedRowsArePrunedWhileRunning: finished queue rows past
// state.retention are deleted while the gateway runs, not only at start.
func TestFinishedRowsArePrunedWhileRunning(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	cfg := parseConfig(t, testConfig(dir, llm.BaseURL(), ""))
	if cfg.State.Retention.D() != 7*24*time.Hour {
		t.Fatalf("default retention %s", cfg.State.Retention)
	}
	clk := clock.NewFake(time.Now())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := buildLockedApp(ctx, cfg, AppOptions{Stdin: inR, Stdout: outW, Now: clk.Now}, 10*time.Millisecond)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		app.Close()
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	io.WriteString(inW, "first\n")
	if !lines.Scan() || lines.Text() != "echo: first" {
		t.Fatalf("answer = %q", lines.Text())
	}
	count := func(status string) int {
		c, err := app.db.QueueCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c[status]
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s never happened", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first request is done", func() bool { return count(core.StatusDone) == 1 })
	time.Sleep(50 * time.Millisecond) // several prune rounds: a fresh row stays
	if n := count(core.StatusDone); n != 1 {
		t.Fatalf("a row finished within the retention was pruned (done rows %d)", n)
	}
	clk.Advance(8 * 24 * time.Hour)
	waitFor("the week-old row is pruned while running", func() bool { return count(core.StatusDone) == 0 })

	io.WriteString(inW, "second\n")
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "echo: second") {
		t.Fatalf("answer after the prune = %q", lines.Text())
	}
}

// A lock file the gateway's user may not open (root made it, running a
// command with sudo) is named with the fix: the data directory's files
// go back to that user.
func TestLockFileOfAnotherUserNamesTheFix(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root opens any file: run as another user")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, lockFileName), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	_, err := lockDataDir(dir)
	if err == nil || !strings.Contains(err.Error(), "chown -R") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("lockDataDir on a lock file it may not open: %v; want the fix (chown -R ... %s)", err, dir)
	}
}

// Root (restore, state migrate or affinity reset run with sudo) gives
// the lock file to the data directory's owner. That owner (the service's
// user) may have made the lock file a link to a file of root's: root must
// neither give that file away nor write into it, or the service's user
// would own any file of the machine.
func TestLockAsRootFollowsNoLinkOutOfTheDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it checks what root does in another user's data directory")
	}
	const owner = 65534 // nobody
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, owner, owner); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(victim, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, lockFileName)); err != nil {
		t.Fatal(err)
	}
	l, err := lockDataDir(dir)
	if err == nil {
		l.release()
	}
	fi, serr := os.Stat(victim)
	if serr != nil {
		t.Fatal(serr)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Errorf("the file the lock file links to was given to %d:%d", st.Uid, st.Gid)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root's secret\n" {
		t.Errorf("the file the lock file links to was written: %q", b)
	}
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), lockFileName) {
		t.Errorf("lockDataDir on a lock file that is a link: %v; want a refusal naming it", err)
	}
}

// TestReleasedLockIsFreeWhileAChildHoldsItsDescriptor: a child process
// being started elsewhere in the process (between fork and exec) shares
// the lock's descriptor for a moment; the release must free the lock
// even so, or the next command on the data directory is refused as if
// another instance ran (a flake of the in-process tests, which start
// subprocesses in parallel). A duplicated descriptor stands for the
// child's.
func TestReleasedLockIsFreeWhileAChildHoldsItsDescriptor(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	child, err := syscall.Dup(int(l.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(child)
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("the data directory after release: %v", err)
	}
	again.release()
}
