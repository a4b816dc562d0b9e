package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Binary identifies a plugin binary: its absolute path and the SHA-256
// of its content.
type Binary struct {
	Path, SHA256 string
}

func identify(path string) (Binary, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Binary{}, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return Binary{}, fmt.Errorf("plugin binary %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Binary{}, fmt.Errorf("hash plugin binary %s: %w", path, err)
	}
	return Binary{Path: abs, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// start starts the plugin confined (startConfined) and records it; done
// is closed once it has exited.
func (p *Process) start(newCmd func() *exec.Cmd, iso *Isolation, rules []landlockRule) error {
	cmd, err := startConfined(newCmd, iso, iso.credential(), iso.limits(), rules, p.log, func(err error) {
		p.waitErr = err
		close(p.done)
	})
	if err != nil {
		return err
	}
	p.cmd, p.pgid = cmd, cmd.Process.Pid
	return nil
}

// startConfined starts a process from a goroutine locked to an OS thread
// of its own, and returns once it runs (or failed to start); exited is
// called with its exit status when it has ended. That thread takes
// no_new_privs and the Landlock domain of rules, which the process
// inherits, and stays until the process has exited: the kernel sends the
// process's PDEATHSIG when the thread that started it ends. The thread is
// never unlocked, so it dies with the goroutine instead of running other
// goroutines while confined. It is never the main thread: the kernel
// judges /proc/<core pid> by that one. lim are set before the process
// runs its first instruction (see exec).
func startConfined(newCmd func() *exec.Cmd, iso *Isolation, cred *syscall.Credential, lim ProcessLimits, rules []landlockRule, log *slog.Logger, exited func(error)) (*exec.Cmd, error) {
	type result struct {
		cmd *exec.Cmd
		err error
	}
	started := make(chan result, 1)
	run := func() {
		abi := 0
		if iso.landlock() {
			abi = iso.landlockABI
		}
		if err := restrictThread(abi, rules); err != nil {
			started <- result{err: err}
			return
		}
		cmd, early, err := execLimited(newCmd, iso, cred, lim, log)
		if err != nil {
			started <- result{err: err}
			return
		}
		started <- result{cmd: cmd}
		if early != nil {
			_ = cmd.Wait()
			exited(early)
		} else {
			exited(cmd.Wait())
		}
	}
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			run()
			return
		}
		// On the main thread: hold it while another goroutine locks
		// another thread, then give it back unchanged.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			run()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
	r := <-started
	return r.cmd, r.err
}

// execLimited starts the command with the resource limits lim in place
// before the process runs its first instruction: the child stops at exec
// under ptrace, the limits are set with prlimit, then it is let go.
// Where ptrace is not permitted (some containers), the limits are set
// right after the start instead, and that is logged once. early is set
// when the process ended before it ran. execLimited runs on the locked
// launch thread, which it may switch to cred, the process's user (nil:
// the core's).
func execLimited(newCmd func() *exec.Cmd, iso *Isolation, cred *syscall.Credential, lim ProcessLimits, log *slog.Logger) (cmd *exec.Cmd, early error, err error) {
	trace := iso != nil && !iso.ptraceOff.Load()
	cmd = newCmd()
	cmd.SysProcAttr.Ptrace = trace
	if err := cmd.Start(); err != nil {
		if !trace || !errors.Is(err, syscall.EPERM) {
			return nil, nil, err
		}
		iso.ptraceOff.Store(true)
		log.Warn("ptrace is not permitted here: plugin resource limits are set just after each plugin starts instead of before", "err", err)
		trace = false
		cmd = newCmd()
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
	}
	pid := cmd.Process.Pid
	fail := func(err error) (*exec.Cmd, error, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}
	if trace {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
			return fail(fmt.Errorf("wait for the plugin to stop at exec: %w", err))
		}
		if !ws.Stopped() {
			return cmd, fmt.Errorf("the plugin ended before it ran (%s)", waitString(ws)), nil
		}
	}
	if cred != nil {
		// prlimit on a process of another user needs that user or
		// CAP_SYS_RESOURCE (often dropped in containers): become the
		// process's user on this thread only. The thread ends with the
		// process and runs nothing else.
		if err := becomeOnThread(cred.Uid, cred.Gid); err != nil {
			return fail(err)
		}
	}
	if iso != nil || lim != (ProcessLimits{}) {
		if err := setLimits(pid, lim); err != nil {
			return fail(err)
		}
	}
	if trace {
		if err := unix.PtraceDetach(pid); err != nil {
			return fail(fmt.Errorf("release the plugin after setting its limits: %w", err))
		}
	}
	return cmd, nil, nil
}

// becomeOnThread switches the calling OS thread, and only it, to uid and
// gid (the raw system calls; Go's Setuid would switch every thread).
func becomeOnThread(uid, gid uint32) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid(%d) on the launch thread: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid(%d) on the launch thread: %w", uid, e)
	}
	return nil
}

func waitString(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// setLimits applies lim to pid, never above the limits the core itself
// has, and turns core dumps off (a plugin's memory holds its calls).
func setLimits(pid int, lim ProcessLimits) error {
	for _, l := range []struct {
		res  int
		v    uint64
		name string
	}{
		{unix.RLIMIT_AS, lim.AddressSpace, "address space (plugins.tools.process_limits.address_space_mb)"},
		{unix.RLIMIT_NOFILE, lim.OpenFiles, "open files (plugins.tools.process_limits.open_files)"},
		{unix.RLIMIT_NPROC, lim.Processes, "processes (plugins.tools.process_limits.processes)"},
		{unix.RLIMIT_DATA, lim.Data, "data"},
		{unix.RLIMIT_CPU, lim.CPUSeconds, "CPU time"},
	} {
		if l.v == 0 {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, l.res, nil, &cur); err != nil {
			return fmt.Errorf("read the %s limit of the plugin: %w", l.name, err)
		}
		v := min(l.v, cur.Max)
		if err := unix.Prlimit(pid, l.res, &unix.Rlimit{Cur: v, Max: v}, nil); err != nil {
			return fmt.Errorf("set the %s limit of the plugin to %d: %w", l.name, v, err)
		}
	}
	if lim.NoFileWrites {
		if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{}, nil); err != nil {
			return fmt.Errorf("forbid the process to write files: %w", err)
		}
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
		return fmt.Errorf("turn off the plugin's core dumps: %w", err)
	}
	return nil
}
