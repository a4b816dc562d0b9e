package pgtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Later is a database that is not up yet: its DSN names a port of
// 127.0.0.1 that refuses connections until Starting or Up, for tests of
// a gateway started before its database.
type Later struct {
	// DSN is the database's DSN with its host and port replaced.
	DSN string

	t      testing.TB
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	up     bool
	conns  map[net.Conn]bool // the connections passed on, for Down
}

// NotYet returns dsn's database behind a port that is closed for now.
func NotYet(t testing.TB, dsn string) *Later {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest.NotYet: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l := &Later{t: t, addr: addr, target: u.Host}
	u.Host = addr
	l.DSN = u.String()
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.ln != nil {
			l.ln.Close()
		}
	})
	return l
}

// Starting opens the port as a server still starting: every connection
// is answered with the protocol's FATAL 57P03 ("the database system is
// starting up"), after TLS is declined.
func (l *Later) Starting() { l.listen(false) }

// Up opens the port to the database: connections are passed on to the
// server.
func (l *Later) Up() { l.listen(true) }

// Down takes the database away as a crash of its server does: the port
// is closed and every connection passed on is cut. Up opens it again.
func (l *Later) Down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (l *Later) listen(up bool) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = up
	if l.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		l.t.Fatalf("pgtest: listen again on %s: %v", l.addr, err)
	}
	l.ln = ln
	go l.serve(ln)
}

func (l *Later) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		up := l.up
		l.mu.Unlock()
		if up {
			l.mu.Lock()
			if l.conns == nil {
				l.conns = map[net.Conn]bool{}
			}
			l.conns[c] = true
			l.mu.Unlock()
			go func() {
				pass(c, l.target)
				l.mu.Lock()
				delete(l.conns, c)
				l.mu.Unlock()
			}()
		} else {
			go startingUp(c)
		}
	}
}

// pass copies c to and from a connection to target until either ends.
func pass(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() {
		io.Copy(s, c)
		s.Close()
	}()
	io.Copy(c, s)
}

// The protocol's request codes for TLS and GSSAPI encryption, sent in
// place of a startup message's version.
const (
	sslRequest    = 80877103
	gssEncRequest = 80877104
)

// startingUp declines encryption, reads the startup message and answers
// it as a server still starting does.
func startingUp(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for {
		var head [8]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:4])
		code := binary.BigEndian.Uint32(head[4:])
		if n == 8 && (code == sslRequest || code == gssEncRequest) {
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if n < 8 {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(n)-8); err != nil {
			return
		}
		break
	}
	var body bytes.Buffer
	for _, f := range [][2]string{{"S", "FATAL"}, {"V", "FATAL"}, {"C", "57P03"}, {"M", "the database system is starting up"}} {
		body.WriteString(f[0] + f[1] + "\x00")
	}
	body.WriteByte(0)
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(4+body.Len()))
	c.Write(append(msg, body.Bytes()...))
}
