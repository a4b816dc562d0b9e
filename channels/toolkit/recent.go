package toolkit

import "sync"

// Recent is a bounded set of recently seen keys (event ids, thread ids):
// once it holds its capacity, adding a key forgets the oldest one. A
// platform uses it to recognize an event it has already committed when
// the platform delivers it again, or to remember conversations it took
// part in. Safe for concurrent use.
type Recent struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string // keys in the order they were added
	next int      // the slot the next key takes (the oldest key once full)
}

// NewRecent builds a set that keeps the last capacity keys (at least 1).
func NewRecent(capacity int) *Recent {
	capacity = max(capacity, 1)
	return &Recent{set: make(map[string]struct{}, capacity), ring: make([]string, 0, capacity)}
}

// Add records key and reports whether it was new. An empty key is never
// recorded.
func (r *Recent) Add(key string) bool {
	if key == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[key]; ok {
		return false
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, key)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = key
		r.next = (r.next + 1) % len(r.ring)
	}
	r.set[key] = struct{}{}
	return true
}

// Has reports whether key is among the recent keys.
func (r *Recent) Has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[key]
	return ok
}

// Len is the number of keys held.
func (r *Recent) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.set)
}
