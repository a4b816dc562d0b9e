package toolkit

import (
	"errors"
	"testing"
	"time"
)

// ConnectedAt says when the channel last connected, and nothing while it
// connects or fails.
func TestHealthConnectedAt(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	h := NewHealth("telegram", time.Minute, func() time.Time { return now })
	if !h.ConnectedAt().IsZero() {
		t.Fatal("connected before it started")
	}
	h.Starting()
	if !h.ConnectedAt().IsZero() {
		t.Fatal("connected while it connects")
	}
	now = now.Add(time.Second)
	h.Connected()
	if got := h.ConnectedAt(); !got.Equal(now) {
		t.Fatalf("ConnectedAt = %v; want %v", got, now)
	}
	h.Failed(errors.New("connection reset"))
	if !h.ConnectedAt().IsZero() {
		t.Fatal("connected while it fails")
	}
}
