package provider

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestDefaultClientKeepsIdleConnections: without a client of the
// caller's, a provider keeps enough idle connections for the calls that
// run at once (Go's default of two re-dials the others, TLS included).
func TestDefaultClientKeepsIdleConnections(t *testing.T) {
	c := newClient(Options{}, "x", "http://127.0.0.1:1")
	tr, ok := c.hc.Transport.(*http.Transport)
	if !ok || tr == http.DefaultTransport {
		t.Fatalf("transport %T; want a transport of the provider's own", c.hc.Transport)
	}
	if tr.MaxIdleConnsPerHost < 8 {
		t.Fatalf("%d idle connections per host; want at least 8", tr.MaxIdleConnsPerHost)
	}
	own := &http.Client{}
	if c := newClient(Options{HTTPClient: own}, "x", ""); c.hc.Transport != nil {
		t.Fatalf("the caller's client got transport %T; want it left as given", c.hc.Transport)
	}
}

// TestIdleConnsKeepsTheConnectionsOfConcurrentCalls: with IdleConns set
// to the calls that run at once, a second round of as many concurrent
// calls reuses the first round's connections (with the default, the
// connections beyond idleConnsPerHost are closed and dialled again).
func TestIdleConnsKeepsTheConnectionsOfConcurrentCalls(t *testing.T) {
	const calls = idleConnsPerHost + 8
	var newConns atomic.Int32
	var inFlight sync.WaitGroup
	gate := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Done()
		<-gate
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		idle       int
		wantRedial bool
	}{{idle: 0, wantRedial: true}, {idle: calls, wantRedial: false}} {
		p := NewOpenAI(Options{BaseURL: srv.URL, IdleConns: tc.idle})
		round := func() int32 {
			before := newConns.Load()
			gate = make(chan struct{})
			inFlight.Add(calls)
			var done sync.WaitGroup
			for range calls {
				done.Go(func() {
					if _, err := p.Complete(context.Background(), Credentials{}, &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}); err != nil {
						t.Error(err)
					}
				})
			}
			inFlight.Wait() // every call holds a connection of its own
			close(gate)
			done.Wait()
			return newConns.Load() - before
		}
		round()
		redialled := round()
		if (redialled > 0) != tc.wantRedial {
			t.Errorf("IdleConns %d: the second round of %d concurrent calls dialled %d new connections; want redials: %v",
				tc.idle, calls, redialled, tc.wantRedial)
		}
	}
}
