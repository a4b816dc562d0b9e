package toolkit

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPClientKeepsConnections: rounds of concurrent requests to one
// host reuse the connections of the first round (Go's default client
// keeps two idle per host and dials the rest again every round).
func TestHTTPClientKeepsConnections(t *testing.T) {
	var dialed atomic.Int64
	release := make(chan struct{})
	var inFlight sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Done()
		<-release // every request of a round is in flight at once
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	const perRound, rounds = 6, 4
	c := NewHTTPClient(10 * time.Second)
	for range rounds {
		inFlight.Add(perRound)
		var done sync.WaitGroup
		for range perRound {
			done.Add(1)
			go func() {
				defer done.Done()
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		inFlight.Wait()
		close(release)
		done.Wait()
		release = make(chan struct{})
	}
	if n := dialed.Load(); n != perRound {
		t.Fatalf("%d connections for %d rounds of %d concurrent requests; want %d (each reused)", n, rounds, perRound, perRound)
	}
}
