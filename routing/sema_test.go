package routing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestSemaphoresUnder50Conversations runs 50 concurrent conversations
// against a cloud and a local fake LLM server and counts the requests in
// flight at each server.
func TestSemaphoresUnder50Conversations(t *testing.T) {
	cloud, local := providertest.NewOpenAI(t), providertest.NewOpenAI(t)
	cloud.Hold()
	local.Hold()
	r, err := New(Options{
		Providers: map[string]provider.Provider{
			"cloud": provider.NewOpenAI(provider.Options{ID: "cloud", BaseURL: cloud.BaseURL()}),
			"local": provider.NewOpenAI(provider.Options{ID: "local", BaseURL: local.BaseURL()}),
		},
		Catalog:  []Model{{Ref: "cloud/m", Weight: 50}, {Ref: "local/m", Weight: 40, Local: true}},
		MaxCloud: 4, MaxLocal: 1,
		Store: NewMemStore(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := "cloud/m"
			if i%5 == 0 {
				model = "local/m"
			}
			conv := core.ConversationKey{Channel: "console", Chat: fmt.Sprint(i)}
			_, err := r.Chat(context.Background(), Call{Purpose: "chat", Conversation: conv, Model: model, Req: userMsg("hello")})
			errs <- err
		}()
	}
	// Both semaphores fill up while the servers hold every request.
	if err := cloud.WaitRequests(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if err := local.WaitRequests(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cloud.Release()
	local.Release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := cloud.MaxInFlight(); got != 4 {
		t.Errorf("cloud max in flight = %d, want 4", got)
	}
	if got := local.MaxInFlight(); got != 1 {
		t.Errorf("local max in flight = %d, want 1", got)
	}
	if cloud.Count() != 40 || local.Count() != 10 {
		t.Errorf("requests cloud=%d local=%d", cloud.Count(), local.Count())
	}
}

// TestSlotWaitIsNoted: a call that has to wait for its provider's slot
// tells its item (core.NoteWaiting) that it only waits, and that it goes
// on once it has the slot, before its request is sent; a call that finds
// a slot free tells nothing.
func TestSlotWaitIsNoted(t *testing.T) {
	local := providertest.NewOpenAI(t)
	local.Hold()
	r, err := New(Options{
		Providers: map[string]provider.Provider{"local": provider.NewOpenAI(provider.Options{ID: "local", BaseURL: local.BaseURL()})},
		Catalog:   []Model{{Ref: "local/m", Weight: 40, Local: true}},
		MaxLocal:  1,
		Store:     NewMemStore(),
	})
	if err != nil {
		t.Fatal(err)
	}
	type note struct {
		waiting bool
		sent    int // requests the server had then
	}
	var mu sync.Mutex
	notes := map[string][]note{}
	waiting := make(chan struct{})
	call := func(name string, done chan<- error) {
		ctx := core.WithWaitNote(context.Background(), func(w bool) {
			mu.Lock()
			notes[name] = append(notes[name], note{w, local.Count()})
			mu.Unlock()
			if w {
				close(waiting)
			}
		})
		conv := core.ConversationKey{Channel: "console", Chat: name}
		_, err := r.Chat(ctx, Call{Purpose: "chat", Conversation: conv, Model: "local/m", Req: userMsg("hello " + name), Sole: true})
		done <- err
	}
	first, second := make(chan error, 1), make(chan error, 1)
	go call("first", first)
	if err := local.WaitRequests(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	go call("second", second)
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the call waiting for the slot did not tell it waits")
	}
	local.Release()
	for _, done := range []chan error{first, second} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes["first"]) != 0 {
		t.Errorf("the call that found the slot free told %+v; want nothing", notes["first"])
	}
	if got := notes["second"]; len(got) != 2 || !got[0].waiting || got[1].waiting || got[1].sent != 1 {
		t.Errorf("the call that waited told %+v; want waiting, then going on before its request was sent (the server had 1)", got)
	}
}

// TestAcquireNotesOnlySoleWaits: a call that is not its item's only work
// (Call.Sole unset: a tool's post-processing, a hook's) tells nothing
// when it waits for a slot; a sole one tells it waits and then that it
// goes on, also when its context ends while it waits.
func TestAcquireNotesOnlySoleWaits(t *testing.T) {
	for _, sole := range []bool{false, true} {
		var notes []bool
		ctx, cancel := context.WithCancel(core.WithWaitNote(context.Background(), func(w bool) { notes = append(notes, w) }))
		cancel()
		sem := make(chan struct{}, 1)
		sem <- struct{}{} // the one slot is taken
		if err := acquire(ctx, sem, sole); err != context.Canceled {
			t.Fatalf("sole %v: acquire with no slot and an ended context: %v; want context.Canceled", sole, err)
		}
		want := "[]"
		if sole {
			want = "[true false]"
		}
		if got := fmt.Sprint(notes); got != want {
			t.Errorf("sole %v: told %s; want %s", sole, got, want)
		}
	}
}
