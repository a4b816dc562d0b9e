package core

import (
	"context"
	"reflect"
	"sync"
)

// Deferred holds the writes of one queue item that need not reach the
// database before its reply does: the usage ledger's rows of the item's
// LLM calls and the implicit verdict on the previous answer. The store
// writes them in the transaction that stores the reply (one write
// instead of three); whatever is left when the item ends (it failed, or
// produced no reply) is written on its own then (DeferredWriter), so a
// failure loses none of them.
//
// Owner is the store that writes them: a producer defers a write only to
// the store it would have written it to itself.
type Deferred struct {
	Owner any

	mu      sync.Mutex
	usage   []UsageRecord
	signals []DeferredSignal
}

// DeferredSignal is a quality signal waiting to be stored, with the
// affinity fold it drives (Fold nil: the signal only).
type DeferredSignal struct {
	Signal      Signal
	Task, Model string
	Fold        func(Affinity) Affinity
	// Arms and Tasks are the router's learning state the signal moved,
	// written with it.
	Arms  []RouterArm
	Tasks []RouterTask
	// Done runs once the signal is stored; id 0 says its request had
	// recorded it already.
	Done func(id int64)
}

// For reports whether the writes go to store (Owner is store; false
// for a store that cannot be compared).
func (d *Deferred) For(store any) bool {
	if d == nil || store == nil || d.Owner == nil {
		return false
	}
	if t := reflect.TypeOf(store); t != reflect.TypeOf(d.Owner) || !t.Comparable() {
		return false
	}
	return d.Owner == store
}

// AddUsage defers a usage ledger row.
func (d *Deferred) AddUsage(u UsageRecord) {
	d.mu.Lock()
	d.usage = append(d.usage, u)
	d.mu.Unlock()
}

// AddSignal defers a signal.
func (d *Deferred) AddSignal(s DeferredSignal) {
	d.mu.Lock()
	d.signals = append(d.signals, s)
	d.mu.Unlock()
}

// Pending returns the writes waiting, oldest first, without taking them:
// the writer calls Written once they are committed.
func (d *Deferred) Pending() ([]UsageRecord, []DeferredSignal) {
	if d == nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.usage[:len(d.usage):len(d.usage)], d.signals[:len(d.signals):len(d.signals)]
}

// Written drops the first usage rows and signals (those Pending returned,
// now committed) and runs the signals' Done with their ids.
func (d *Deferred) Written(usage int, signals []DeferredSignal, ids []int64) {
	d.mu.Lock()
	d.usage = d.usage[usage:]
	d.signals = d.signals[len(signals):]
	d.mu.Unlock()
	for i, s := range signals {
		if s.Done != nil {
			s.Done(ids[i])
		}
	}
}

// DeferredWriter is an optional capability of a Store: it writes the
// deferred writes left when an item ends, in one transaction (none when
// nothing is left). A store with it also writes the deferred writes of
// the context SaveReply is given (DeferredFrom) with the reply.
type DeferredWriter interface {
	WriteDeferred(ctx context.Context, d *Deferred) error
}

type deferredKey struct{}

// WithDeferred returns a context that carries d to the item's producers.
func WithDeferred(ctx context.Context, d *Deferred) context.Context {
	return context.WithValue(ctx, deferredKey{}, d)
}

// DeferredFrom returns the deferred writes ctx carries; nil when none.
func DeferredFrom(ctx context.Context) *Deferred {
	d, _ := ctx.Value(deferredKey{}).(*Deferred)
	return d
}
