package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ConfinedCmd is a short-lived program the core runs on bytes it must not
// parse in its own process (the text of a PDF a user sent): it gets Stdin,
// and its standard output is the result.
type ConfinedCmd struct {
	Path string
	Args []string
	// Env adds "KEY=value" entries to the minimal environment (PATH, LANG,
	// TZ...; nothing of the core's secrets).
	Env   []string
	Stdin []byte
	// Memory (bytes of private writable memory, RLIMIT_DATA: a Go
	// program needs about 128 MiB of it to start), CPUSeconds and Timeout
	// (wall time) bound the run; Output bounds the standard output kept.
	// Zero values take the defaults: 512 MiB, 10 s, 30 s and 1 MiB.
	Memory     uint64
	CPUSeconds uint64
	Timeout    time.Duration
	Output     int
}

// Which limit stopped a confined run (ConfinedError.Limit).
const (
	LimitMemory = "memory"
	LimitCPU    = "cpu"
	LimitTime   = "time"
	LimitOutput = "output"
)

// ConfinedError is a confined run that did not succeed: a limit stopped
// it (Limit set), or it exited with a status other than 0 (Code, and the
// last line it wrote to its standard error in Message).
type ConfinedError struct {
	Limit   string
	Code    int
	Message string
	Err     error
}

func (e *ConfinedError) Error() string {
	switch e.Limit {
	case LimitMemory:
		return "it needed more memory than it may use"
	case LimitCPU:
		return "it used more CPU time than it may"
	case LimitTime:
		return "it ran longer than it may"
	case LimitOutput:
		return "it wrote more output than it may"
	}
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("it failed (%v)", e.Err)
}

func (e *ConfinedError) Unwrap() error { return e.Err }

// RunConfined runs c with the protections a plugin gets: its own session,
// no_new_privs, the run_as user when the core runs as root (from a
// private copy of the binary when that user cannot reach it, as a plugin
// does; else, when no copy may be made, as the core's user, which is
// logged), a Landlock
// domain that reaches only the binary and the system's program
// directories, and resource limits set before its first instruction:
// memory, CPU time, 16 open files, no file writes, no core dump.
// Its input is written only once the limits are in place. The run is
// killed with its whole session when ctx ends, when Timeout passes or
// when it writes more than Output bytes.
func (iso *Isolation) RunConfined(ctx context.Context, c ConfinedCmd, log *slog.Logger) ([]byte, error) {
	if c.Memory == 0 {
		c.Memory = 512 << 20
	}
	if c.CPUSeconds == 0 {
		c.CPUSeconds = 10
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Output <= 0 {
		c.Output = 1 << 20
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()

	cred := iso.credential()
	if cred != nil {
		if err := checkRunnableBy(c.Path, cred.Uid, cred.Gid, iso.user); err != nil {
			// A binary the run_as user cannot reach runs from a private
			// copy, as a plugin does (stageBinary); else as the core's user.
			copyPath, serr := "", err
			if !isScript(c.Path) {
				copyPath, serr = iso.stagedHelper(c.Path, log)
			}
			if serr == nil {
				c.Path = copyPath
			} else {
				iso.warnOnce.Do(func() {
					log.Warn("a confined helper runs as the core's user, not plugins.tools.run_as: that user cannot run the binary, nor a private copy of it", "err", err, "copy", serr)
				})
				cred = nil
			}
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok && k != "HOME" && k != "TMPDIR" {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, c.Env...)
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(c.Path, c.Args...)
		cmd.Env = env
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		return cmd
	}
	var rules []landlockRule
	if iso.landlock() {
		rules = confinedRules(c.Path)
	}
	lim := ProcessLimits{Data: c.Memory, OpenFiles: 16, CPUSeconds: c.CPUSeconds, NoFileWrites: true}
	exited := make(chan error, 1)
	cmd, err := startConfined(newCmd, iso, cred, lim, rules, log, func(err error) { exited <- err })
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(c.Path), err)
	}
	sid := cmd.Process.Pid
	go func() {
		// The helper may stop reading early (EPIPE): its answer says why.
		_, _ = inW.Write(c.Stdin)
		inW.Close()
	}()
	var stderr tailBuffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&stderr, errR)
		errR.Close()
	}()
	var out bytes.Buffer
	overflow := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		n, _ := io.Copy(&out, io.LimitReader(outR, int64(c.Output)+1))
		if n > int64(c.Output) {
			close(overflow)
		}
		_, _ = io.Copy(io.Discard, outR)
		outR.Close()
	}()
	var waitErr error
	limit := ""
	select {
	case waitErr = <-exited:
	case <-overflow:
		limit = LimitOutput
	case <-ctx.Done():
		limit = LimitTime
	}
	if limit != "" {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		waitErr = <-exited
	}
	killSession(sid)
	<-readDone
	wg.Wait()
	if limit == LimitTime && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, ctx.Err()
	}
	if limit == "" {
		select {
		case <-overflow:
			limit = LimitOutput
		default:
		}
	}
	if limit == "" && waitErr == nil {
		return out.Bytes(), nil
	}
	ce := &ConfinedError{Limit: limit, Err: waitErr, Message: stderr.lastLine()}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		ce.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ce.Limit == "" {
			// The kernel kills at the limit, but the CPU time it reports
			// is sampled at its ticks: on a loaded machine a process
			// killed at 1 s reads 0.82-0.89 s. Half the limit tells a CPU
			// kill from another SIGKILL.
			cpu := ee.UserTime() + ee.SystemTime()
			switch {
			case ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGXCPU) && cpu >= time.Duration(c.CPUSeconds)*time.Second/2:
				ce.Limit = LimitCPU
			case outOfMemory(stderr.String()):
				ce.Limit = LimitMemory
			}
		}
	}
	return nil, ce
}

// outOfMemory recognizes the Go runtime's (and the race detector's)
// words for an allocation the memory limit refused; and a runtime that
// crashed with a signal while its program was allocating, which the limit
// also causes: the garbage collector's own structures cannot grow there
// either (seen as a SIGSEGV in the collector's span queue during a 2 GB
// make, in about one run of twenty on a loaded machine).
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "failed to allocate", "errno: 12)"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	crashed := strings.HasPrefix(strings.TrimSpace(stderr), "SIGSEGV") || strings.HasPrefix(strings.TrimSpace(stderr), "SIGBUS")
	return crashed && strings.Contains(stderr, "runtime.mallocgc(")
}

// confinedRules are the Landlock rules of a confined helper: its binary's
// directory and the system's program directories to read and execute,
// and /dev/null; nothing else.
func confinedRules(path string) []landlockRule {
	var rules []landlockRule
	rx := func(p string) { rules = append(rules, landlockRule{p, llRead | llExec}) }
	rx(filepath.Dir(path))
	if real, err := filepath.EvalSymlinks(path); err == nil {
		rx(filepath.Dir(real))
	}
	for _, p := range systemExecPaths {
		rx(p)
	}
	return append(rules, landlockRule{"/dev/null", unix.LANDLOCK_ACCESS_FS_READ_FILE | llWrite})
}

// tailBuffer keeps the first and the last 4 KiB written to it (a Go
// program's fatal error comes first, its goroutines' stacks after).
type tailBuffer struct {
	mu         sync.Mutex
	head, tail []byte
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := min(tailMax-len(t.head), len(p)); n > 0 {
		t.head = append(t.head, p[:n]...)
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > tailMax {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + "\n" + string(t.tail)
}

// lastLine is the last non-empty line written, at most 300 bytes.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	lines := strings.Split(strings.TrimSpace(string(t.tail)), "\n")
	t.mu.Unlock()
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}
