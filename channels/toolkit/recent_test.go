package toolkit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRecentForgetsTheOldest(t *testing.T) {
	r := NewRecent(3)
	for _, k := range []string{"a", "b", "c"} {
		if !r.Add(k) {
			t.Fatalf("Add(%q) on a new key = false", k)
		}
	}
	if r.Add("b") {
		t.Error("Add of a key already held must report false")
	}
	if r.Add("") || r.Has("") {
		t.Error("an empty key must never be recorded")
	}
	r.Add("d") // forgets a, the oldest
	if r.Has("a") || !r.Has("b") || !r.Has("c") || !r.Has("d") || r.Len() != 3 {
		t.Errorf("after d: a=%v b=%v c=%v d=%v len=%d; want a forgotten, b c d kept", r.Has("a"), r.Has("b"), r.Has("c"), r.Has("d"), r.Len())
	}
	r.Add("e")
	r.Add("f")
	if r.Has("b") || r.Has("c") || !r.Has("f") || r.Len() != 3 {
		t.Errorf("the set must keep only the last three keys: len=%d", r.Len())
	}
	if one := NewRecent(0); !one.Add("x") || !one.Add("y") || one.Has("x") {
		t.Error("a capacity below 1 must still keep one key")
	}
}

func TestRecentConcurrent(t *testing.T) {
	r := NewRecent(100)
	var wg sync.WaitGroup
	var fresh atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if r.Add(fmt.Sprint(i)) {
					fresh.Add(1)
				}
				_ = r.Has(fmt.Sprint(g))
			}
		})
	}
	wg.Wait()
	if fresh.Load() != 50 || r.Len() != 50 {
		t.Errorf("50 distinct keys added from 8 goroutines: %d reported new, %d held", fresh.Load(), r.Len())
	}
}

func TestLivenessExpires(t *testing.T) {
	c := newClock()
	l := NewLiveness(2*time.Minute, c.Now)
	c.Advance(time.Minute)
	l.Beat()
	c.Advance(90 * time.Second)
	if l.Expired() || l.Quiet() != 90*time.Second {
		t.Fatalf("90s after a beat: expired=%v quiet=%v; want not expired", l.Expired(), l.Quiet())
	}
	c.Advance(30 * time.Second)
	if !l.Expired() {
		t.Fatal("2m without a beat must expire")
	}
	// The report starts a new period for the new connection.
	c.Advance(time.Minute)
	if l.Expired() {
		t.Fatal("a minute into the new period must not expire")
	}
	c.Advance(time.Minute)
	if !l.Expired() {
		t.Fatal("a whole quiet period after the report must expire again")
	}
}

func TestLivenessWatchRecyclesAQuietConnection(t *testing.T) {
	l := NewLiveness(40*time.Millisecond, nil)
	recycled := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Watch(ctx, func() { recycled <- struct{}{} })
	}()
	select {
	case <-recycled:
	case <-time.After(10 * time.Second):
		t.Fatal("a connection without beats was never recycled")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}
