package plugins

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/opentalon/opentalon/core"
)

// Sandbox says how plugin processes are confined (plugins.tools.run_as,
// plugins.tools.sandbox, plugins.tools.process_limits).
type Sandbox struct {
	// RunAs is the user plugins run as when the core runs as root: a
	// user name or a numeric uid. "" picks DefaultRunAs when that user
	// exists, else "nobody". Naming root keeps plugins as root (logged
	// as a warning). Ignored when the core is not root.
	RunAs string
	// Landlock confines each plugin to its own directory and socket
	// where the kernel offers Landlock.
	Landlock bool
	// ReadPaths and WritePaths are extra paths a Landlock-confined plugin
	// may read (and execute), or read and write.
	ReadPaths, WritePaths []string
	// Limits are the resource limits of each plugin process.
	Limits ProcessLimits
}

// ProcessLimits are setrlimit values for one plugin process; 0 = leave
// the limit the core has.
type ProcessLimits struct {
	AddressSpace uint64 // bytes (RLIMIT_AS)
	// Data is RLIMIT_DATA in bytes: the private writable memory the
	// process may map. Unlike the address space it leaves out what the
	// Go runtime only reserves, so it bounds a Go program's heap.
	Data      uint64
	OpenFiles uint64 // RLIMIT_NOFILE
	// Processes is RLIMIT_NPROC: the kernel counts every process and
	// thread of the plugin's user, so all plugins sharing a run_as user
	// share it.
	Processes uint64
	// CPUSeconds is RLIMIT_CPU (soft and hard): the kernel kills the
	// process with SIGKILL once it has used that much CPU time.
	CPUSeconds uint64
	// NoFileWrites sets RLIMIT_FSIZE to 0: writing to a file kills the
	// process (pipes and sockets are not files).
	NoFileWrites bool
}

// DefaultRunAs is the dedicated user docs/plugins.md tells how to create.
const DefaultRunAs = "opentalon-plugin"

// Isolation is a Sandbox resolved against the running system: who the
// plugins run as and which kernel protections exist. Build it with
// NewIsolation; it is safe for concurrent use.
type Isolation struct {
	sb   Sandbox
	cred *syscall.Credential // nil = the core's own user
	user string              // for the log
	name string              // the run_as user name, when cred is set
	// landlockABI is the kernel's Landlock ABI version; 0 = none.
	landlockABI int
	landlockErr error
	// ptraceOff is set once starting a plugin stopped at its first
	// instruction failed (ptrace not permitted): limits are then set
	// right after the start.
	ptraceOff atomic.Bool
	warnings  []string
	// warnOnce logs once that a confined helper runs as the core's user.
	warnOnce sync.Once

	// The private copies of confined helpers the run_as user cannot
	// reach (stagedHelper), by path, in their own locked root; Close
	// removes them, and none is made after it.
	stageMu     sync.Mutex
	stageRoot   *socketRoot
	stagedBins  map[string]string
	stageClosed bool
	// stageRefused is why run_as cannot run a copy either (a temporary
	// directory it cannot enter): not tried again for every run.
	stageRefused error
}

// stagedHelper returns a private copy of the helper binary at path that
// the run_as user may run (stageBinary), made once per path and again
// when it is gone (a cleaner of /tmp removed it).
func (iso *Isolation) stagedHelper(path string, log *slog.Logger) (string, error) {
	iso.stageMu.Lock()
	defer iso.stageMu.Unlock()
	if iso.stageClosed || iso.cred == nil {
		return "", errors.New("no private copy: the isolation is closed or runs no other user")
	}
	if iso.stageRefused != nil {
		return "", iso.stageRefused
	}
	if p, ok := iso.stagedBins[path]; ok {
		if _, err := os.Lstat(p); err == nil {
			return p, nil
		}
		delete(iso.stagedBins, path)
	}
	if iso.stageRoot != nil {
		if _, err := os.Lstat(iso.stageRoot.dir); err != nil {
			iso.stageRoot.remove()
			iso.stageRoot = nil
		}
	}
	if iso.stageRoot == nil {
		r, err := newSocketRoot("", true, log)
		if err != nil {
			return "", err
		}
		iso.stageRoot, iso.stagedBins = r, map[string]string{}
	}
	dir, copyPath, _, err := stageBinary(iso.stageRoot.dir, path)
	if err != nil {
		return "", err
	}
	// The temporary directory itself may be out of the user's reach
	// (TMPDIR=/tmp/user/0, 0700).
	if err := checkRunnableBy(copyPath, iso.cred.Uid, iso.cred.Gid, iso.user); err != nil {
		os.RemoveAll(dir)
		iso.stageRefused = fmt.Errorf("%w (set TMPDIR to a directory every user may enter)", err)
		return "", iso.stageRefused
	}
	iso.stagedBins[path] = copyPath
	log.Info("plugins.tools.run_as cannot enter the helper's directory or run the file there; it runs from a private copy", "binary", path, "copy", copyPath)
	return copyPath, nil
}

// Close removes the private copies of confined helpers (a crash leaves
// them to the sweep of the next temporary socket root).
func (iso *Isolation) Close() error {
	if iso == nil {
		return nil
	}
	iso.stageMu.Lock()
	defer iso.stageMu.Unlock()
	iso.stageClosed = true
	if iso.stageRoot == nil {
		return nil
	}
	err := iso.stageRoot.remove()
	iso.stageRoot, iso.stagedBins = nil, nil
	return err
}

// NewIsolation resolves sb: the run_as user (only when the core runs as
// root) and the Landlock ABI. A missing protection is reported by
// Describe, never an error; an unknown run_as user is.
func NewIsolation(sb Sandbox) (*Isolation, error) {
	iso := &Isolation{sb: sb}
	if os.Geteuid() == 0 {
		name := sb.RunAs
		if name == "" {
			name = "nobody"
			if _, err := user.Lookup(DefaultRunAs); err == nil {
				name = DefaultRunAs
			}
		}
		u, err := lookupUser(name)
		if err != nil {
			return nil, core.Errorf(core.KindInvalid, "plugins.tools.run_as %q: %w; create the user (docs/plugins.md: useradd --system --no-create-home --shell /usr/sbin/nologin %s) or name an existing one", name, err, DefaultRunAs)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		iso.user = fmt.Sprintf("%s (uid %d)", u.Username, uid)
		if uid == 0 {
			iso.warnings = append(iso.warnings, "plugins.tools.run_as names root: plugins run as root and can read everything the core can")
		} else {
			iso.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
			iso.name = u.Username
		}
	} else {
		iso.user = fmt.Sprintf("the core's user (uid %d)", os.Geteuid())
		if sb.RunAs != "" {
			iso.warnings = append(iso.warnings, "plugins.tools.run_as applies only when the core runs as root; plugins run as the core's user")
		}
	}
	if sb.Landlock {
		iso.landlockABI, iso.landlockErr = landlockABI()
	} else {
		iso.landlockErr = errors.New("turned off (plugins.tools.sandbox.landlock: false)")
	}
	return iso, nil
}

func lookupUser(name string) (*user.User, error) {
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		return user.LookupId(name)
	}
	return user.Lookup(name)
}

// credential returns the credential plugins start with (nil = the
// core's own).
func (iso *Isolation) credential() *syscall.Credential {
	if iso == nil || iso.cred == nil {
		return nil
	}
	c := *iso.cred
	return &c
}

func (iso *Isolation) landlock() bool { return iso != nil && iso.landlockABI > 0 }

// limits returns the limits to set. The process limit counts every
// process of the plugin's user, so it is set only when plugins run as a
// user of their own: on the core's user it would count the core's and
// the user's other processes too.
func (iso *Isolation) limits() ProcessLimits {
	if iso == nil {
		return ProcessLimits{}
	}
	l := iso.sb.Limits
	if iso.cred == nil {
		l.Processes = 0
	}
	return l
}

// Describe logs which protections are active and which are missing.
func (iso *Isolation) Describe(log *slog.Logger, nonDumpable error) {
	attrs := []any{"run_as", iso.user}
	if nonDumpable == nil {
		attrs = append(attrs, "core_non_dumpable", true)
	} else {
		attrs = append(attrs, "core_non_dumpable", false)
		iso.warnings = append(iso.warnings, "the core could not mark itself non-dumpable ("+nonDumpable.Error()+"): plugins of its user may read its memory and environment")
	}
	if iso.landlockABI > 0 {
		attrs = append(attrs, "landlock", fmt.Sprintf("ABI %d: each plugin confined to its own directory and socket", iso.landlockABI))
	} else {
		attrs = append(attrs, "landlock", "unavailable: "+iso.landlockErr.Error())
		if iso.cred == nil {
			iso.warnings = append(iso.warnings, "without Landlock or a separate run_as user, plugins can read the files the core's user can")
		} else {
			iso.warnings = append(iso.warnings, "without Landlock, plugins sharing the run_as user can reach each other's processes and directories")
		}
	}
	l := iso.limits()
	procs := limitString(l.Processes, false)
	if iso.cred == nil && iso.sb.Limits.Processes > 0 {
		procs = "not set (plugins share the core's user, whose processes it would count)"
	}
	attrs = append(attrs, "limits", fmt.Sprintf("address space %s, open files %s, processes %s", limitString(l.AddressSpace, true), limitString(l.OpenFiles, false), procs))
	log.Info("plugin isolation", attrs...)
	for _, w := range iso.warnings {
		log.Warn("plugin isolation is weaker than it could be", "reason", w)
	}
}

func limitString(v uint64, bytes bool) string {
	switch {
	case v == 0:
		return "unlimited"
	case bytes:
		return fmt.Sprintf("%d MB", v>>20)
	}
	return strconv.FormatUint(v, 10)
}

// HardenCore marks the core process non-dumpable: processes of its user
// without CAP_SYS_PTRACE can then neither read its /proc/<pid>/environ,
// mem or fds nor attach to it, and it writes no core dumps.
func HardenCore() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
