package toolkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Endpoint is an HTTP endpoint a channel serves for its platform (a
// webhook, the Events API): it listens, serves with ServerLimits until the
// context ends, shuts down gracefully, and tells its address once it
// listens (useful with a listen address of "127.0.0.1:0"). Safe for
// concurrent use; Serve runs once at a time.
type Endpoint struct {
	once  sync.Once
	ready chan struct{}
	mu    sync.Mutex
	addr  net.Addr
}

// endpointShutdown bounds the graceful shutdown of an endpoint.
const endpointShutdown = 5 * time.Second

// Serve listens on listen (the config key key names it in errors) and
// serves h until ctx ends, returning nil then. Once it listens, started
// runs (register the webhook with the platform, mark the channel
// connected); its error ends Serve. A listen failure is a KindInvalid
// error naming key; a server failure after start is returned as is.
func (e *Endpoint) Serve(ctx context.Context, key, listen string, h http.Handler, l ServerLimits, started func(addr net.Addr) error) error {
	e.init()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return core.Errorf(core.KindInvalid, "%s %q: %w", key, listen, err)
	}
	srv := NewServer(h, l)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endpointShutdown)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	e.mu.Lock()
	e.addr = ln.Addr()
	e.mu.Unlock()
	e.once.Do(func() { close(e.ready) })
	if started != nil {
		if err := started(ln.Addr()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("the server on %s (%s): %w", listen, key, err)
	}
}

// Addr waits until the endpoint listens and returns its address.
func (e *Endpoint) Addr(ctx context.Context) (net.Addr, error) {
	e.init()
	select {
	case <-e.ready:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.addr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *Endpoint) init() {
	e.mu.Lock()
	if e.ready == nil {
		e.ready = make(chan struct{})
	}
	e.mu.Unlock()
}
