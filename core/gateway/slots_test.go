package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// gatedAgent answers a message once the test lets it (one gate per
// text) and records what it was asked, in order.
type gatedAgent struct {
	mu    sync.Mutex
	asked []string
	gates map[string]chan struct{}
	in    chan string
}

func (a *gatedAgent) gate(text string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gates[text] == nil {
		a.gates[text] = make(chan struct{})
	}
	return a.gates[text]
}

func (a *gatedAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	a.asked = append(a.asked, t.Text)
	a.mu.Unlock()
	a.in <- t.Text
	select {
	case <-a.gate(t.Text):
	case <-ctx.Done():
		return core.Answer{}, ctx.Err()
	}
	text := "answer to " + t.Text
	return core.Answer{Text: text, Model: "fake/m", TaskType: "chat", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// TestOneWorkerClaimsAtEnqueueAndInOrder: with one worker, the message
// that finds it free is claimed by its enqueue and answered; what comes
// while it works (its own conversation's next message, another
// conversation's) waits, and is answered once the worker is free again
// — the conversation's messages in order, never two at once.
func TestOneWorkerClaimsAtEnqueueAndInOrder(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{SoleClaimer: true, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ag := &gatedAgent{gates: map[string]chan struct{}{}, in: make(chan string, 10)}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, Workers: 1, LeaseTTL: time.Minute})
	accept := func(chat, id, text string) {
		t.Helper()
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: chat}, MessageID: id, UserID: "u", Text: text}
		for i := 0; ; i++ {
			err := r.g.Accept(context.Background(), in)
			if err == nil {
				return
			}
			if i > 1000 {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	asked := func(want string) {
		t.Helper()
		select {
		case got := <-ag.in:
			if got != want {
				t.Fatalf("the agent was asked %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the agent was not asked %q", want)
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case got := <-ag.in:
			t.Fatalf("the agent was asked %q while the only worker was busy", got)
		case <-time.After(100 * time.Millisecond):
		}
	}

	accept("a", "1", "a1")
	asked("a1")
	accept("a", "2", "a2")
	accept("b", "3", "b1")
	quiet()
	close(ag.gate("a1"))
	r.expect("answer to a1")
	// Both wait for the one worker: a's next or b's first, one at a time.
	first := <-ag.in
	quiet()
	close(ag.gate(first))
	r.expect("answer to " + first)
	second := <-ag.in
	close(ag.gate(second))
	r.expect("answer to " + second)
	if got := fmt.Sprint(first, " ", second); got != "a2 b1" && got != "b1 a2" {
		t.Fatalf("after a1 the agent was asked %s; want a2 and b1", got)
	}
	// Idle again: the next message is claimed by its enqueue at once.
	accept("b", "4", "b2")
	asked("b2")
	close(ag.gate("b2"))
	r.expect("answer to b2")
}

// gatedDurability is the store with the flush of a claiming enqueue
// held by the test: the item it starts is durable once gate is closed.
type gatedDurability struct {
	*store.DB
	gate chan struct{}
}

func (s gatedDurability) EnqueueClaim(ctx context.Context, it core.QueueItem, now time.Time, start func(core.QueueItem)) (bool, bool, error) {
	return s.DB.EnqueueClaim(ctx, it, now, func(c core.QueueItem) {
		c.Durable = s.gate
		start(c)
	})
}

// TestNothingIsSentBeforeTheEnqueueIsDurable: a message claimed by its
// enqueue is worked on while its commit is flushed, but its answer is
// sent only once the flush is over.
func TestNothingIsSentBeforeTheEnqueueIsDurable(t *testing.T) {
	db := openDB(t, store.Options{SoleClaimer: true})
	st := gatedDurability{DB: db, gate: make(chan struct{})}
	ag := &fakeAgent{}
	r := runOn(t, db, gateway.Options{Store: st, Agent: ag, Workers: 2})
	r.accept("1", "hi")
	deadline := time.Now().Add(10 * time.Second)
	for {
		ag.mu.Lock()
		asked := ag.calls
		ag.mu.Unlock()
		if asked > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent was not asked before the flush was over; the work should start at once")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case got := <-r.ch.notify:
		t.Fatalf("sent %q before the enqueue was durable", got)
	case <-time.After(100 * time.Millisecond):
	}
	close(st.gate)
	r.expect("answer to hi")
}
