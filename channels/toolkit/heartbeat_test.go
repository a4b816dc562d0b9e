package toolkit

import (
	"testing"
	"time"
)

func TestAckWatch(t *testing.T) {
	c := newClock()
	w := NewAckWatch(10 * time.Second)
	if _, over := w.Overdue(c.Now().Add(time.Hour)); over {
		t.Fatal("a watch that never saw a connection is overdue")
	}
	w.Connected(c.Now())
	// The first heartbeat is answered at once; then one every 4s.
	c.Advance(50 * time.Millisecond)
	w.Ack(c.Now())
	if got := w.Interval(); got != 10*time.Second {
		t.Errorf("interval before a second ack = %v, want the initial 10s", got)
	}
	for range 3 {
		c.Advance(4 * time.Second)
		w.Ack(c.Now())
		w.Ack(c.Now()) // polled twice: no news
	}
	if got := w.Interval(); got != 4*time.Second {
		t.Errorf("learned interval = %v, want 4s", got)
	}
	// An extra heartbeat answered in between is no interval.
	c.Advance(500 * time.Millisecond)
	w.Ack(c.Now())
	if got := w.Interval(); got != 4*time.Second {
		t.Errorf("after an extra ack 500ms later the interval is %v, want still 4s", got)
	}
	c.Advance(3500 * time.Millisecond)
	w.Ack(c.Now())
	c.Advance(7 * time.Second)
	if silent, over := w.Overdue(c.Now()); over || silent != 7*time.Second {
		t.Errorf("7s after an ack with a 4s interval: silent %v, overdue %v; want not overdue yet", silent, over)
	}
	c.Advance(2 * time.Second)
	if silent, over := w.Overdue(c.Now()); !over || silent != 9*time.Second {
		t.Errorf("9s after an ack with a 4s interval: silent %v, overdue %v; want overdue", silent, over)
	}
	// A new connection starts the clock again and keeps the interval.
	w.Connected(c.Now())
	if _, over := w.Overdue(c.Now().Add(5 * time.Second)); over {
		t.Error("a fresh connection is overdue after 5s")
	}
	if _, over := w.Overdue(c.Now().Add(9 * time.Second)); !over {
		t.Error("a fresh connection that never acknowledged is not overdue after two learned intervals")
	}
	w.Stopped()
	if _, over := w.Overdue(c.Now().Add(time.Hour)); over {
		t.Error("a stopped watch is overdue")
	}
	w.Ack(c.Now().Add(time.Minute)) // ignored while stopped
	if got := w.Interval(); got != 4*time.Second {
		t.Errorf("an ack while stopped changed the interval to %v", got)
	}
}
