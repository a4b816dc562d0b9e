package plugins

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// checkNotWritable refuses path when group or others may write it:
// whoever can write a plugin binary, or the directory it is in, controls
// a plugin. A sticky directory (/tmp) passes for a binary's directory:
// others cannot replace a file they do not own there.
func checkNotWritable(what, path string, stickyOK bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	m := fi.Mode()
	if m.Perm()&0o022 == 0 || stickyOK && m.IsDir() && m&os.ModeSticky != 0 {
		return nil
	}
	return fmt.Errorf("%s %s has mode %04o and is writable by group or others: whoever can write it controls a plugin; run: chmod go-w %s", what, path, m.Perm(), path)
}

// checkBinary refuses a plugin binary that is not a regular file or that
// group or others may write or replace.
func checkBinary(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("plugin binary %s: %w (check plugins.tools.plugin_dir / plugins.tools.plugins)", path, err)
	}
	if err := checkNotWritable("plugin binary", path, false); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("plugin binary %s: %w", path, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("plugin binary %s is not a regular file", path)
	}
	return checkNotWritable("the directory of plugin binary", filepath.Dir(real), true)
}

// checkRunnableBy reports why the user uid/gid could not start path (a
// directory on the way it may not search, a binary it may not execute,
// a script it may not read), so the error names the path and the fix
// instead of a bare "permission denied".
func checkRunnableBy(path string, uid, gid uint32, runAs string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	may := func(p string, want os.FileMode) (bool, os.FileMode, uint32) {
		fi, err := os.Stat(p)
		if err != nil {
			return false, 0, 0
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		var bits os.FileMode
		switch {
		case st != nil && st.Uid == uid:
			bits = perm >> 6
		case st != nil && st.Gid == gid:
			bits = perm >> 3
		default:
			bits = perm
		}
		var owner uint32
		if st != nil {
			owner = st.Uid
		}
		return bits&want == want, perm, owner
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if ok, perm, owner := may(d, 0o1); !ok {
			return fmt.Errorf("plugin %s cannot be started as %s (plugins.tools.run_as): directory %s has mode %04o (owner uid %d) and that user may not enter it; run: chmod o+x %s, or move the plugin to a directory that user can reach", path, runAs, d, perm, owner, d)
		}
		if d == "/" || d == "." {
			break
		}
	}
	want := os.FileMode(0o1)
	if isScript(real) {
		want |= 0o4 // the interpreter reads the script
	}
	if ok, perm, owner := may(real, want); !ok {
		return fmt.Errorf("plugin %s cannot be started as %s (plugins.tools.run_as): it has mode %04o (owner uid %d); run: chmod o+rx %s", path, runAs, perm, owner, path)
	}
	return nil
}

func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [2]byte
	_, err = io.ReadFull(f, head[:])
	return err == nil && bytes.Equal(head[:], []byte("#!"))
}
