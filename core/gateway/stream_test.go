package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// editing is a channel that streams by editing one message; it records
// each Send and Edit with the clock's time as it is called.
type editing struct {
	clk *clock.Fake
	pol core.StreamPolicy
	// firstTakes is how long the first Send takes on the clock.
	firstTakes time.Duration
	mu         sync.Mutex
	calls      []string
	seen       chan string
}

var _ core.Streamer = (*editing)(nil)

func (c *editing) Name() string                               { return "fake" }
func (c *editing) Run(ctx context.Context, _ core.Sink) error { <-ctx.Done(); return nil }
func (c *editing) Format(text string) []string                { return []string{text} }
func (c *editing) Close() error                               { return nil }
func (c *editing) Streaming(core.Outbound) core.StreamPolicy  { return c.pol }
func (c *editing) Draft(text string) []core.DraftPart {
	return []core.DraftPart{{Raw: text, Part: text}}
}

func (c *editing) record(what string) {
	c.mu.Lock()
	c.calls = append(c.calls, what)
	c.mu.Unlock()
	c.seen <- what
}

func (c *editing) Send(_ context.Context, _ core.Outbound, part string) (string, error) {
	c.record(fmt.Sprintf("+%v send %q", c.clk.Now().Sub(t0), part))
	c.mu.Lock()
	takes := c.firstTakes
	c.firstTakes = 0
	c.mu.Unlock()
	c.clk.Advance(takes)
	return "m1", nil
}

func (c *editing) Edit(_ context.Context, _ core.Outbound, id, part string) error {
	c.record(fmt.Sprintf("+%v edit %s %q", c.clk.Now().Sub(t0), id, part))
	return nil
}

// t0 is when the stream tests' clock starts.
var t0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

// writer is an agent that writes its answer one delta at a time, as the
// test hands them over; an empty delta ends the answer.
type writer struct{ deltas chan string }

func (w writer) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	var text strings.Builder
	for {
		select {
		case d := <-w.deltas:
			if d == "" {
				return core.Answer{Text: text.String(), Model: "fake/m"}, nil
			}
			text.WriteString(d)
			if t.Stream != nil {
				t.Stream.Delta(d)
			}
		case <-ctx.Done():
			return core.Answer{}, ctx.Err()
		}
	}
}

// TestStreamShowsTheAnswerAtMostOncePerInterval drives a stream on the
// fake clock: the first text is shown after the first delay, each update
// an interval after the one before ended (the first send takes 300ms:
// counted from its start, the next update would reach the platform
// closer than the interval after it), however fast the text grows, and
// the final text an interval after the last update.
func TestStreamShowsTheAnswerAtMostOncePerInterval(t *testing.T) {
	clk := clock.NewFake(t0)
	ch := &editing{clk: clk, pol: core.StreamPolicy{Mode: core.StreamEdit, FirstDelay: 500 * time.Millisecond, Interval: time.Second},
		firstTakes: 300 * time.Millisecond, seen: make(chan string, 10)}
	ag := writer{deltas: make(chan string)}
	db := openDB(t, store.Options{Now: clk.Now})
	g := gateway.New(gateway.Options{Store: db, Agent: ag, Clock: clk})
	g.AddChannel(ch)
	serve(t, g)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "1", UserID: "u", Text: "tell me"}
	for g.Accept(context.Background(), in) != nil {
		time.Sleep(time.Millisecond)
	}

	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	// sleeping waits until the stream (or the delivery) waits on the
	// clock, besides the dispatcher's timer.
	sleeping := func() {
		t.Helper()
		if err := clk.BlockUntil(wctx, 2); err != nil {
			t.Fatalf("nothing waits on the clock: %v (calls %q)", err, ch.calls)
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case c := <-ch.seen:
			t.Fatalf("%s before its time", c)
		case <-time.After(20 * time.Millisecond):
		}
	}
	shown := func(want string) {
		t.Helper()
		select {
		case got := <-ch.seen:
			if got != want {
				t.Fatalf("%s; want %s", got, want)
			}
		case <-wctx.Done():
			t.Fatalf("nothing shown; want %s", want)
		}
	}
	give := func(d string) {
		t.Helper()
		select {
		case ag.deltas <- d:
		case <-wctx.Done():
			t.Fatalf("the agent did not take %q", d)
		}
	}

	give("Once ")
	sleeping()
	clk.Advance(499 * time.Millisecond)
	give("upon ") // more text during the first delay is shown with it
	quiet()
	clk.Advance(time.Millisecond)
	shown(`+500ms send "Once upon "`)
	sleeping()
	give("a ")
	give("time")
	clk.Advance(999 * time.Millisecond)
	quiet()
	clk.Advance(time.Millisecond)
	shown(`+1.8s edit m1 "Once upon a time"`)
	// The answer is complete right after an update: the final text waits
	// for the interval.
	sleeping()
	give(".")
	give("")
	sleeping()
	clk.Advance(999 * time.Millisecond)
	quiet()
	clk.Advance(time.Millisecond)
	shown(`+2.8s edit m1 "Once upon a time."`)
}

// TestStreamStopsPastTheLease: a stream whose lease went by without a
// renewal (a stall, the database out of reach) edits nothing more; the
// claimer that takes the item over answers it.
func TestStreamStopsPastTheLease(t *testing.T) {
	const ttl = 30 * time.Second
	clk := clock.NewFake(t0)
	ch := &editing{clk: clk, pol: core.StreamPolicy{Mode: core.StreamEdit, FirstDelay: 500 * time.Millisecond, Interval: time.Second}, seen: make(chan string, 10)}
	ag := writer{deltas: make(chan string)}
	db := openDB(t, store.Options{Now: clk.Now, LeaseTTL: time.Hour})
	st := &failingRenewal{DB: db}
	g := gateway.New(gateway.Options{Store: st, Agent: ag, Clock: clk, LeaseTTL: ttl})
	g.AddChannel(ch)
	serve(t, g)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "1", UserID: "u", Text: "tell me"}
	for g.Accept(context.Background(), in) != nil {
		time.Sleep(time.Millisecond)
	}
	give := func(d string) bool {
		select {
		case ag.deltas <- d:
			return true
		case <-time.After(2 * time.Second):
			return false
		}
	}
	if !give("one ") {
		t.Fatal("the agent never started")
	}
	// The first text is shown after the first delay, within the lease.
	for deadline := time.Now().Add(10 * time.Second); ; {
		clk.Advance(100 * time.Millisecond)
		select {
		case got := <-ch.seen:
			if !strings.Contains(got, `send "one "`) {
				t.Fatalf("first shown: %s", got)
			}
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the first text was never shown")
			}
			continue
		}
		break
	}
	// The lease goes by; every renewal fails.
	for range 31 {
		clk.Advance(time.Second)
	}
	give("two") // the work may have stopped already
	for range 5 {
		clk.Advance(time.Second)
		select {
		case got := <-ch.seen:
			t.Fatalf("%s past the lease", got)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStreamAnswerCompleteWithinTheFirstDelay: an answer complete before
// the first delay is over is sent once, at once, and never edited (its
// stream showed nothing); the next answer of the conversation streams as
// usual (shown after the delay, its final text an interval later).
func TestStreamAnswerCompleteWithinTheFirstDelay(t *testing.T) {
	clk := clock.NewFake(t0)
	ch := &editing{clk: clk, pol: core.StreamPolicy{Mode: core.StreamEdit, FirstDelay: 500 * time.Millisecond, Interval: time.Second},
		seen: make(chan string, 10)}
	ag := writer{deltas: make(chan string)}
	db := openDB(t, store.Options{Now: clk.Now})
	g := gateway.New(gateway.Options{Store: db, Agent: ag, Clock: clk})
	g.AddChannel(ch)
	serve(t, g)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	accept := func(id string) {
		t.Helper()
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: id, UserID: "u", Text: "tell me"}
		for g.Accept(context.Background(), in) != nil {
			time.Sleep(time.Millisecond)
		}
	}
	give := func(d string) {
		t.Helper()
		select {
		case ag.deltas <- d:
		case <-wctx.Done():
			t.Fatalf("the agent did not take %q", d)
		}
	}
	shown := func(want string) {
		t.Helper()
		select {
		case got := <-ch.seen:
			if got != want {
				t.Fatalf("%s; want %s", got, want)
			}
		case <-wctx.Done():
			t.Fatalf("nothing shown; want %s", want)
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case c := <-ch.seen:
			t.Fatalf("%s: the answer was complete", c)
		case <-time.After(20 * time.Millisecond):
		}
	}

	accept("1")
	give("Quick ")
	// The first delay's timer (besides the dispatcher's).
	if err := clk.BlockUntil(wctx, 2); err != nil {
		t.Fatalf("nothing waits on the clock: %v", err)
	}
	clk.Advance(499 * time.Millisecond)
	give("answer")
	give("")
	shown(`+499ms send "Quick answer"`)
	clk.Advance(time.Second)
	quiet()

	accept("2")
	give("Slow ")
	if err := clk.BlockUntil(wctx, 2); err != nil {
		t.Fatalf("nothing waits on the clock: %v", err)
	}
	clk.Advance(500 * time.Millisecond)
	shown(`+1.999s send "Slow "`)
	give("answer")
	give("")
	if err := clk.BlockUntil(wctx, 2); err != nil {
		t.Fatalf("nothing waits on the clock: %v", err)
	}
	clk.Advance(time.Second)
	shown(`+2.999s edit m1 "Slow answer"`)
}
