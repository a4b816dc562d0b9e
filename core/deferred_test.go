package core_test

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
)

type pointerStore struct{ n int }

type sliceStore []int // not comparable

func TestDeferredFor(t *testing.T) {
	a, b := &pointerStore{}, &pointerStore{}
	for _, c := range []struct {
		name         string
		owner, store any
		want         bool
	}{
		{"the owner", a, a, true},
		{"another store of its type", a, b, false},
		{"a store of another type", a, sliceStore{1}, false},
		{"stores that cannot be compared", sliceStore{1}, sliceStore{1}, false},
		{"no store", a, nil, false},
	} {
		d := &core.Deferred{Owner: c.owner}
		if got := d.For(c.store); got != c.want {
			t.Errorf("%s: For = %v; want %v", c.name, got, c.want)
		}
	}
	var none *core.Deferred
	if none.For(a) || core.DeferredFrom(context.Background()) != nil {
		t.Error("no Deferred is for any store")
	}
}

func TestDeferredPendingAndWritten(t *testing.T) {
	d := &core.Deferred{}
	d.AddUsage(core.UsageRecord{Model: "m1"})
	var done []int64
	d.AddSignal(core.DeferredSignal{Signal: core.Signal{Kind: "accepted"}, Done: func(id int64) { done = append(done, id) }})
	u, s := d.Pending()
	d.AddUsage(core.UsageRecord{Model: "m2"}) // arrives while the first are written
	d.Written(len(u), s, []int64{7})
	if len(done) != 1 || done[0] != 7 {
		t.Fatalf("Done got %v; want 7", done)
	}
	if u, s := d.Pending(); len(u) != 1 || u[0].Model != "m2" || len(s) != 0 {
		t.Fatalf("left pending: %+v %+v; want the usage row that came later", u, s)
	}
	if got := core.DeferredFrom(core.WithDeferred(context.Background(), d)); got != d {
		t.Fatal("the context does not carry the Deferred")
	}
}
