package sdk

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// parentOnly accepts only connections from the process that started the
// plugin (the core), checked with SO_PEERCRED: another plugin that finds
// this plugin's socket cannot call it and so cannot bypass the guard.
type parentOnly struct {
	net.Listener
	parent int
}

func (l parentOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pid, err := peerPID(c)
		if err == nil && pid == l.parent {
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("peer pid %d is not the core (pid %d)", pid, l.parent)
		}
		fmt.Fprintf(os.Stderr, "opentalon plugin: refused a connection: %v\n", err)
		c.Close()
	}
}

func peerPID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}
