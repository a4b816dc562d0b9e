package store

import (
	"context"
	"slices"
	"sync"
)

// writeQueue is what the grouped SQLite writes share (insertGroup,
// txGroup): a write that arrives while another is being written queues,
// in order of arrival, and when that one is done the first of those
// queued writes them all as one batch.
type writeQueue[T queuedWrite[T]] struct {
	mu      sync.Mutex
	writing bool
	waiting []T
}

// queuedWrite is a write that can wait in a writeQueue: a pointer to a
// struct that embeds a writeSlot.
type queuedWrite[T any] interface {
	comparable
	slot() *writeSlot[T]
}

// writeSlot is a queued write's place in its queue.
type writeSlot[T any] struct {
	// done is closed when the write was written (or failed), or when
	// this one is to write batch (the writes queued behind the last).
	done  chan struct{}
	batch []T
}

func (s *writeSlot[T]) slot() *writeSlot[T] { return s }

// join returns the batch w is to write, starting with w (the caller
// writes it and then calls handOn), or nil when another wrote w. A
// caller whose context ends while it waits gets ctx's error and w is not
// written, unless it was already taken into a batch being written (its
// outcome is then waited for).
func (q *writeQueue[T]) join(ctx context.Context, w T) ([]T, error) {
	q.mu.Lock()
	if !q.writing {
		q.writing = true
		q.mu.Unlock()
		return []T{w}, nil
	}
	s := w.slot()
	s.done = make(chan struct{})
	q.waiting = append(q.waiting, w)
	q.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		q.mu.Lock()
		if i := slices.Index(q.waiting, w); i >= 0 {
			q.waiting = slices.Delete(q.waiting, i, i+1)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
		q.mu.Unlock()
		<-s.done
	}
	return s.batch, nil
}

// handOn ends the write of batch: its waiting members learn their
// outcome and the first of the writes queued meanwhile writes the next
// batch, of at most max of them (0 = all), or none is being written any
// more.
func (q *writeQueue[T]) handOn(batch []T, max int) {
	q.mu.Lock()
	n := len(q.waiting)
	if max > 0 {
		n = min(n, max)
	}
	next := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	q.writing = n > 0
	q.mu.Unlock()
	for _, o := range batch[1:] {
		close(o.slot().done)
	}
	if n > 0 {
		next[0].slot().batch = next
		close(next[0].slot().done)
	}
}
