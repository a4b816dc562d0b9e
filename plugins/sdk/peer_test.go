package sdk

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestParentOnly checks the peer check with this process as the client:
// accepted when it is the expected parent, refused otherwise.
func TestParentOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent int
		want   bool
	}{{"the core", os.Getpid(), true}, {"another process", os.Getpid() + 100000, false}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.sock")
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			pl := parentOnly{Listener: l, parent: tc.parent}
			accepted := make(chan bool, 1)
			go func() {
				c, err := pl.Accept()
				if err == nil {
					c.Close()
				}
				accepted <- err == nil
			}()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Either way the server side closes the connection: accepted
			// (and closed by the goroutine) or refused.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("read data from the listener")
			}
			l.Close() // ends a refusing Accept loop
			if got := <-accepted; got != tc.want {
				t.Fatalf("accepted = %v, want %v", got, tc.want)
			}
		})
	}
}
