package toolkit

import (
	"net/http"
	"time"
)

// IdleConnsPerHost is how many idle connections a channel keeps to its
// platform's API. A bot has several requests to one host in flight at
// once (a long poll, a send, a typing indicator, a reaction); Go's
// default of two idle connections per host closes the others after each
// burst, and every message then pays for a new TCP (and TLS) connection.
const IdleConnsPerHost = 16

// NewHTTPClient returns a client with its own transport (a clone of the
// default one, so its connection pool is not shared with the rest of the
// process) that keeps IdleConnsPerHost idle connections per host.
func NewHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: NewTransport()}
}

// NewTransport returns a clone of the default transport keeping
// IdleConnsPerHost idle connections per host.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = IdleConnsPerHost
	return t
}
