package plugins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock (Linux 5.13+) confines a thread and every process it starts
// to the files its ruleset allows, whatever their owner and mode, and
// (ABI 6+) keeps them from signalling processes or reaching abstract
// unix sockets outside their domain. A plugin's domain allows: its own
// directory (socket, temporary files) fully; its binary's directory and
// the system's program directories to read and execute; /sys and the
// /etc files programs need (name resolution, TLS roots, time zone,
// users) to read; /dev/null and the random devices. Nothing else: not
// the config, the profiles file, the database, plugin_dir for writing,
// or another plugin's directory.

// landlockABI returns the kernel's Landlock ABI version.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch errno {
	case 0:
		return int(v), nil
	case unix.ENOSYS:
		return 0, errors.New("this kernel has no Landlock (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)")
	case unix.EOPNOTSUPP:
		return 0, errors.New("Landlock is built in but off (add landlock to the lsm= kernel parameter)")
	}
	return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
}

const (
	llExec  = unix.LANDLOCK_ACCESS_FS_EXECUTE
	llRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	llAll   = ^uint64(0)
	// llFile are the rights that apply to a file (not a directory).
	llFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS are the filesystem rights an ABI version knows; a ruleset
// that handles a right denies it everywhere no rule allows it.
func handledFS(abi int) uint64 {
	h := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: EXECUTE … MAKE_SYM
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

type landlockRule struct {
	path   string
	access uint64
}

// Paths every plugin may read and execute, or only read.
var (
	systemExecPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store"}
	// Not /proc: Landlock does not keep a confined process from reading
	// /proc/<pid>/environ, maps or fd of another process of its user, so
	// the plugin gets none of /proc (list it in sandbox.read_paths if a
	// plugin needs it).
	systemReadPaths = []string{"/sys",
		"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
		"/etc/services", "/etc/protocols", "/etc/localtime", "/etc/timezone", "/etc/ld.so.cache",
		"/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
		"/etc/crypto-policies", "/etc/mime.types", "/etc/passwd", "/etc/group", "/etc/alternatives",
		"/etc/os-release"}
	deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}
)

// landlockRules lists what one plugin may reach: dir fully, its binary's
// directory (and that of any absolute path among its arguments) to read
// and execute, the system paths, and the configured extra paths.
func (iso *Isolation) landlockRules(dir string, spec Spec) []landlockRule {
	rules := []landlockRule{{dir, llAll}}
	rx := func(p string) { rules = append(rules, landlockRule{p, llRead | llExec}) }
	bins := []string{spec.Path}
	for _, a := range spec.Args {
		if filepath.IsAbs(a) {
			bins = append(bins, a)
		}
	}
	for _, b := range bins {
		if fi, err := os.Stat(b); err == nil && fi.Mode().IsRegular() {
			rx(filepath.Dir(b))
			if real, err := filepath.EvalSymlinks(b); err == nil {
				rx(filepath.Dir(real))
			}
		}
	}
	for _, p := range systemExecPaths {
		rx(p)
	}
	for _, p := range systemReadPaths {
		rules = append(rules, landlockRule{p, llRead})
	}
	if m, _ := filepath.Glob("/etc/python3*"); len(m) > 0 {
		for _, p := range m {
			rules = append(rules, landlockRule{p, llRead})
		}
	}
	for _, p := range deviceFiles {
		rules = append(rules, landlockRule{p, unix.LANDLOCK_ACCESS_FS_READ_FILE | llWrite})
	}
	for _, p := range iso.sb.ReadPaths {
		rx(p)
	}
	for _, p := range iso.sb.WritePaths {
		rules = append(rules, landlockRule{p, llAll})
	}
	return rules
}

// restrictThread sets no_new_privs on the calling OS thread and, when
// abi > 0, puts it in a new Landlock domain made of rules. Both pass to
// every process the thread starts. The caller must have locked the
// goroutine to its thread and must never unlock it.
func restrictThread(abi int, rules []landlockRule) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if abi <= 0 {
		return nil
	}
	handled := handledFS(abi)
	// Older kernels are given the prefix of the struct they know.
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	size := unsafe.Sizeof(attr.Access_fs)
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, r := range rules {
		pfd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue
			}
			return fmt.Errorf("landlock rule for %s: %w", r.path, err)
		}
		var st unix.Stat_t
		access := r.access & handled
		if unix.Fstat(pfd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= llFile
		}
		pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		unix.Close(pfd)
		if errno != 0 {
			return fmt.Errorf("landlock rule for %s: %w", r.path, errno)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
