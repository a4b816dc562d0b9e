package toolkit

import (
	"net/http"
	"time"
)

// ServerLimits bound what one client may hold of an HTTP server, so idle
// keep-alive connections or slow clients cannot exhaust its file
// descriptors or memory. A zero field takes the default.
type ServerLimits struct {
	ReadHeader time.Duration // default 10s
	Read       time.Duration // the whole request; default 30s
	Write      time.Duration // the whole response; default 60s
	Idle       time.Duration // a keep-alive connection between requests; default 2m
	Body       int64         // request body bytes; default 1 MiB
	Header     int           // request header bytes; default 64 KiB
}

func (l ServerLimits) withDefaults() ServerLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.Read, 30*time.Second)
	def(&l.Write, 60*time.Second)
	def(&l.Idle, 2*time.Minute)
	if l.Body <= 0 {
		l.Body = 1 << 20
	}
	if l.Header <= 0 {
		l.Header = 64 << 10
	}
	return l
}

// NewServer returns an http.Server for h with the limits set: timeouts on
// reading, writing and idling, and a cap on header and body sizes (a
// larger body fails its read, and the handler answers 413 or 400).
func NewServer(h http.Handler, l ServerLimits) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, l.Body),
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.Header,
	}
}
