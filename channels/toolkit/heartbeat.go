package toolkit

import (
	"sync"
	"time"
)

// AckWatch tells when a connection's keep-alive went unanswered: a
// websocket whose heartbeats are no longer acknowledged may look open for
// hours while nothing arrives on it (a "zombie" connection), and is best
// dropped and opened again at once.
//
// The owner reports each acknowledgement (Ack) and asks Overdue from time
// to time. The heartbeat interval is learned from the gap between two
// acknowledgements; until one is measured the initial interval is
// assumed. Once an interval is learned, an acknowledgement sooner than
// half of it after the previous one (an extra heartbeat the server asked
// for) is not counted. A connection is overdue when no acknowledgement arrived for
// two intervals: the heartbeat sent after the last acknowledgement got no
// answer by the time the next one is due. Safe for concurrent use.
type AckWatch struct {
	mu       sync.Mutex
	initial  time.Duration
	learned  time.Duration
	last     time.Time // the latest acknowledgement, or the connection's start
	acked    bool      // an acknowledgement arrived on this connection
	watching bool
}

// NewAckWatch builds a watch assuming the given heartbeat interval until
// it measures one.
func NewAckWatch(initial time.Duration) *AckWatch {
	return &AckWatch{initial: initial}
}

// Connected starts watching a new connection opened at at. An interval
// learned on an earlier connection is kept.
func (w *AckWatch) Connected(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.acked, w.watching = at, false, true
}

// Stopped stops watching until the next Connected.
func (w *AckWatch) Stopped() {
	w.mu.Lock()
	w.watching = false
	w.mu.Unlock()
}

// Ack records an acknowledgement received at at. The same time reported
// again (an owner polling a "last acknowledged" field) is no news.
func (w *AckWatch) Ack(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watching || !at.After(w.last) {
		return
	}
	gap := at.Sub(w.last)
	if w.learned > 0 && gap < w.learned/2 {
		return
	}
	if w.acked {
		w.learned = gap
	}
	w.last, w.acked = at, true
}

// Interval is the heartbeat interval assumed now: the learned one, else
// the initial one.
func (w *AckWatch) Interval() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.interval()
}

func (w *AckWatch) interval() time.Duration {
	if w.learned > 0 {
		return w.learned
	}
	return w.initial
}

// Overdue reports how long the connection has been silent and whether
// that is past two intervals. It is never overdue while not watching.
func (w *AckWatch) Overdue(now time.Time) (silent time.Duration, overdue bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watching {
		return 0, false
	}
	silent = now.Sub(w.last)
	return silent, w.interval() > 0 && silent > 2*w.interval()
}
