package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestLeaseFence: a claim of this process that took the item back hands
// its lease over (adopt), so a renewal that raced it with the old token
// does not stop the work; the new token's loss does; and work that has
// already lost the item is not handed a lease.
func TestLeaseFence(t *testing.T) {
	const ttl = 30 * time.Second
	t0 := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name     string
		run      func(f *leaseFence) bool // reports whether the work may send at the end
		wantLost bool
		wantTok  int64
	}{
		{"an old token's loss after a hand-over", func(f *leaseFence) bool {
			f.adopt(2, t0.Add(ttl), ttl)
			f.lose(1)
			return f.held(t0.Add(ttl + time.Second))
		}, false, 2},
		{"the current token's loss", func(f *leaseFence) bool {
			f.adopt(2, t0.Add(ttl), ttl)
			f.lose(2)
			return f.held(t0.Add(ttl + time.Second))
		}, true, 2},
		{"past the fence, then a claim", func(f *leaseFence) bool {
			if f.held(t0.Add(ttl)) {
				t.Error("held past the fence")
			}
			if f.adopt(2, t0.Add(ttl), ttl) {
				t.Error("work that stopped was handed a lease")
			}
			return f.held(t0.Add(ttl))
		}, true, 1},
		{"a claim while the lease still holds is no take-back", func(f *leaseFence) bool {
			// The work's outcome put the item back to wait and the claim
			// found it due before the work ended: the claim is a new try.
			if f.adopt(2, t0.Add(ttl/2), ttl) {
				t.Error("a claim within the lease was handed to the work")
			}
			return f.held(t0.Add(ttl / 2))
		}, false, 1},
		{"a hand-over moves the fence", func(f *leaseFence) bool {
			f.adopt(2, t0.Add(ttl), ttl)
			return f.held(t0.Add(ttl + ttl/2))
		}, false, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			f := &leaseFence{lease: 1, cancel: cancel}
			f.extend(t0, ttl)
			held := tc.run(f)
			lost := errors.Is(context.Cause(ctx), core.ErrLeaseLost)
			if lost != tc.wantLost || held == tc.wantLost || f.token() != tc.wantTok {
				t.Fatalf("lost %v, may send %v, token %d; want lost %v, token %d", lost, held, f.token(), tc.wantLost, tc.wantTok)
			}
		})
	}
}
