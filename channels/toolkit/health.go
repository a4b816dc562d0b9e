package toolkit

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Health tracks a channel's connection for /readyz and /status: whether
// it started, since when it is failing, the last error and the last event
// received. A channel that keeps failing for longer than the grace period
// is unhealthy. Safe for concurrent use.
type Health struct {
	name  string
	grace time.Duration
	now   func() time.Time

	mu           sync.Mutex
	started      bool
	failingSince time.Time
	lastErr      error
	lastEvent    time.Time
	connectedAt  time.Time
}

// NewHealth builds the tracker of channel name; grace is how long it may
// be down before Healthy reports it (default 1 minute).
func NewHealth(name string, grace time.Duration, now func() time.Time) *Health {
	if grace <= 0 {
		grace = time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &Health{name: name, grace: grace, now: now}
}

// Starting records that the channel is connecting: it counts as failing
// until Connected.
func (h *Health) Starting() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	if h.failingSince.IsZero() {
		h.failingSince = h.now()
	}
}

// Connected records a working connection.
func (h *Health) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	h.failingSince = time.Time{}
	h.lastErr = nil
	h.connectedAt = h.now()
}

// ConnectedAt is when the channel last said it is connected (Connected);
// zero while it fails or connects, and before it ever connected.
func (h *Health) ConnectedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failingSince.IsZero() {
		return time.Time{}
	}
	return h.connectedAt
}

// Failed records a connection failure.
func (h *Health) Failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		h.failingSince = h.now()
	}
	h.lastErr = err
}

// Down records a failure that makes the channel unhealthy at once (a
// credential the platform refused, a connection known to be dead).
func (h *Health) Down(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	h.failingSince = h.now().Add(-h.grace - time.Nanosecond)
	h.lastErr = err
}

// Event records that the platform delivered something.
func (h *Health) Event() {
	h.mu.Lock()
	h.lastEvent = h.now()
	h.mu.Unlock()
}

// LastEvent is when the platform last delivered anything.
func (h *Health) LastEvent() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastEvent
}

// Healthy returns nil while the channel works, else why not.
func (h *Health) Healthy() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		return errors.New(h.name + ": not started")
	}
	if h.failingSince.IsZero() {
		return nil
	}
	down := h.now().Sub(h.failingSince)
	if down <= h.grace {
		return nil
	}
	cause := "not connected yet"
	if h.lastErr != nil {
		cause = h.lastErr.Error()
	}
	return fmt.Errorf("%s: failing for %s: %s", h.name, down.Round(time.Second), cause)
}
