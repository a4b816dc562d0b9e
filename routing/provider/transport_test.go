package provider

import (
	"net/http"
	"testing"
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
