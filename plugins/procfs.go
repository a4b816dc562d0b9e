package plugins

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Each plugin runs in its own session (setsid), so its session id is its
// pid. A process cannot join a process group or session of another
// session, so the session id identifies the plugin and all its
// descendants, whatever they do to their process groups.

// sessionOf reads the session id of pid from /proc/<pid>/stat.
func sessionOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after the last ')' are: state ppid pgrp session ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return strconv.Atoi(f[3])
}

// killSession sends SIGKILL to every process of session sid.
func killSession(sid int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if s, err := sessionOf(pid); err == nil && s == sid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
