package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	coreclock "github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// failingAgent fails the question "hi" with err the first failures times, then
// answers; it answers other messages at once.
type failingAgent struct {
	mu       sync.Mutex
	err      error
	failures int
	calls    int
}

func (a *failingAgent) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.Text != "hi" {
		return core.Answer{Text: "answer to " + t.Text, Model: "fake/m"}, nil
	}
	a.calls++
	if a.failures > 0 {
		a.failures--
		return core.Answer{}, a.err
	}
	return core.Answer{Text: "answer to hi", Model: "fake/m"}, nil
}

// delayRig runs a gateway and its store on a fake clock; request 1 is the
// message under test.
type delayRig struct {
	*rig
	clk *coreclock.Fake
	// waits are the waits request 1 was given, in order.
	waits []time.Duration
	pokes int
}

func newDelayRig(t *testing.T, ag core.Agent, o gateway.Options) *delayRig {
	t.Helper()
	c := coreclock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	db := openDB(t, store.Options{Now: c.Now})
	o.Store, o.Agent, o.Now = db, ag, c.Now
	return &delayRig{rig: runOn(t, db, o), clk: c}
}

// nextTry waits until request 1 rests in the queue due after the current
// time, records its wait, moves the clock to when it is due and wakes
// the dispatcher with a message in another conversation (answered too:
// the caller expects "answer to poke").
func (r *delayRig) nextTry() {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		it, st, err := r.db.QueueItem(context.Background(), 1)
		if err != nil {
			r.t.Fatal(err)
		}
		if st == core.StatusQueued && it.NotBefore.After(r.clk.Now()) {
			r.waits = append(r.waits, it.NotBefore.Sub(r.clk.Now()))
			r.clk.Set(it.NotBefore)
			break
		}
		if st == core.StatusDone || st == core.StatusFailed {
			r.t.Fatalf("request 1 is %s; want it waiting", st)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("request 1 is %s, due %v at %v; want it waiting for a later time", st, it.NotBefore, r.clk.Now())
		}
		time.Sleep(time.Millisecond)
	}
	r.pokes++
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "poke"}, MessageID: "poke" + string(rune('a'+r.pokes)), Text: "poke"}
	if err := r.g.Accept(context.Background(), in); err != nil {
		r.t.Fatal(err)
	}
}

// sent collects what the channel sends until want texts arrived that are
// not "answer to poke".
func (r *delayRig) sent(want int) []string {
	r.t.Helper()
	var got []string
	for len(got) < want {
		select {
		case s := <-r.ch.notify:
			if s != "answer to poke" {
				got = append(got, s)
			}
		case <-time.After(10 * time.Second):
			r.t.Fatalf("sent %q; want %d messages", got, want)
		}
	}
	return got
}

// TestShortRetryAfterForeverTellsTheUserOnce (issue 25, finding 12): a
// provider that keeps answering "retry after 1s" is not asked every
// second in silence: each wait is at least the first backoff step (the
// router's cooldown ladder makes them grow), and the user is told once,
// when the delay passes a few seconds, before the answer.
func TestShortRetryAfterForeverTellsTheUserOnce(t *testing.T) {
	ag := &failingAgent{err: &core.Error{Kind: core.KindRateLimited, Msg: "429", RetryAfter: time.Second}, failures: 6}
	r := newDelayRig(t, ag, gateway.Options{})
	r.accept("1", "hi")
	for range 6 {
		r.nextTry()
	}
	got := r.sent(2)
	if !strings.HasPrefix(got[0], "⏳ Your answer is delayed: the AI provider asked me to slow down.") || got[1] != "answer to hi" {
		t.Fatalf("sent %q; want one delay notice, then the answer", got)
	}
	for _, w := range r.waits {
		if w < 2*time.Second {
			t.Fatalf("waits = %v; want none shorter than the first backoff step (2s)", r.waits)
		}
	}
	select {
	case s := <-r.ch.notify:
		if s != "answer to poke" {
			t.Fatalf("sent %q after the answer", s)
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// TestProviderOutageWaitsInsteadOfGivingUp (issue 25, finding 13): 5xx
// and timeouts are waited out like rate limits — more failures in a row
// than queue.max_attempts, each waiting the time the router says, with
// one delay notice, and then the answer, not an apology; no attempt is
// counted.
func TestProviderOutageWaitsInsteadOfGivingUp(t *testing.T) {
	for _, kind := range []core.Kind{core.KindUnavailable, core.KindTimeout} {
		t.Run(kind.String(), func(t *testing.T) {
			ag := &failingAgent{err: &core.Error{Kind: kind, Msg: "provider p: HTTP 500", RetryAfter: 4 * time.Second}, failures: 5}
			r := newDelayRig(t, ag, gateway.Options{MaxAttempts: 3})
			r.accept("1", "hi")
			for range 5 {
				r.nextTry()
			}
			got := r.sent(2)
			if !strings.HasPrefix(got[0], "⏳ Your answer is delayed: the AI provider") || got[1] != "answer to hi" {
				t.Fatalf("sent %q; want one delay notice, then the answer", got)
			}
			if ag.calls != 6 {
				t.Fatalf("agent asked %d times for hi, want 6", ag.calls)
			}
			for _, w := range r.waits {
				if w != 4*time.Second {
					t.Fatalf("waits = %v; want the 4s the error says each time", r.waits)
				}
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				st, attempts, _, _ := r.db.QueueStatus(context.Background(), 1)
				if st == core.StatusDone && attempts == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("request is %s after %d attempts; want done, only the answered one counted", st, attempts)
				}
			}
		})
	}
}

// TestOutageGivesUpAtMaxWait: a provider that never comes back gets the
// message its last try when queue.max_wait ends, then the apology.
func TestOutageGivesUpAtMaxWait(t *testing.T) {
	ag := &failingAgent{err: &core.Error{Kind: core.KindUnavailable, Msg: "provider p: HTTP 503", RetryAfter: 16 * time.Second}, failures: 1000}
	r := newDelayRig(t, ag, gateway.Options{MaxWait: time.Minute})
	r.accept("1", "hi")
	for range 4 { // 16s, 16s, 16s, then 12s to the minute
		r.nextTry()
	}
	got := r.sent(2)
	if !strings.HasPrefix(got[0], "⏳") || !strings.Contains(got[1], "Sorry, I could not answer that: the AI provider is not answering right now.") {
		t.Fatalf("sent %q; want the notice, then the apology", got)
	}
	if last := r.waits[len(r.waits)-1]; last != 12*time.Second {
		t.Fatalf("waits = %v; want the last try at max_wait (12s after the third)", r.waits)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, _, _, _ := r.db.QueueStatus(context.Background(), 1); st == core.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("request 1 is not failed")
		}
	}
}

// TestCooldownIsRecheckedUntilTheProviderIsBack: a message waiting for a
// provider's cooldown (2 minutes here) tries again every recheckEvery, so
// it is answered within that of the provider's return (the router's probe
// ends the cooldown), not when the cooldown would have ended; the user is
// told the provider's own time once.
func TestCooldownIsRecheckedUntilTheProviderIsBack(t *testing.T) {
	ag := &failingAgent{err: &core.Error{Kind: core.KindRateLimited, Msg: "429", RetryAfter: 2 * time.Minute}, failures: 2}
	r := newDelayRig(t, ag, gateway.Options{})
	r.accept("1", "hi")
	r.nextTry()
	r.nextTry()
	got := r.sent(2)
	if got[0] != "⏳ Your answer is delayed: the AI provider asked me to slow down. I will answer in about 2 minutes." || got[1] != "answer to hi" {
		t.Fatalf("sent %q; want the notice with the provider's time, then the answer", got)
	}
	if want := []time.Duration{15 * time.Second, 15 * time.Second}; fmt.Sprint(r.waits) != fmt.Sprint(want) {
		t.Fatalf("waits = %v; want %v (a try every 15s, not the 2m cooldown)", r.waits, want)
	}
}

// TestCooldownPastMaxWaitPromisesNoAnswer: a provider cooling down past
// queue.max_wait leaves the message one last try when max_wait ends; the
// user is told that, not promised an answer then (they were told "I will
// answer in about 18s", then got the apology).
func TestCooldownPastMaxWaitPromisesNoAnswer(t *testing.T) {
	ag := &failingAgent{err: &core.Error{Kind: core.KindTimeout, Msg: "timeout", RetryAfter: time.Minute}, failures: 1000}
	r := newDelayRig(t, ag, gateway.Options{MaxWait: 20 * time.Second})
	r.accept("1", "hi")
	r.nextTry()
	got := r.sent(2)
	if got[0] != "⏳ Your answer is delayed: the AI provider is answering too slowly. I will keep trying for about 20 seconds, and tell you if I cannot answer." ||
		!strings.HasPrefix(got[1], "Sorry, I could not answer that") {
		t.Fatalf("sent %q; want the last try announced, then the apology", got)
	}
}

// TestUnknownFailureStillUsesAttempts: a failure that is not a provider's
// (a bug, a store error) is retried as attempts and given up after
// queue.max_attempts; when its retries delay the answer past a few
// seconds, the user is told once as well.
func TestUnknownFailureStillUsesAttempts(t *testing.T) {
	ag := &failingAgent{err: &core.Error{Kind: core.KindUnknown, Msg: "boom"}, failures: 100}
	r := newDelayRig(t, ag, gateway.Options{MaxAttempts: 3})
	r.accept("1", "hi")
	r.nextTry() // 2s
	r.nextTry() // 8s: past the quiet delay
	got := r.sent(2)
	if !strings.HasPrefix(got[0], "⏳ Your answer is delayed: I hit a problem on my side.") || !strings.HasPrefix(got[1], "Sorry, I could not answer that: something went wrong on my side.") {
		t.Fatalf("sent %q; want the notice, then the apology after 3 attempts", got)
	}
	if ag.calls != 3 {
		t.Fatalf("agent asked %d times, want 3", ag.calls)
	}
}

// TestProviderBackWakesTheWaitingMessages: a message put back to wait for
// a cooling credential runs again as soon as the router says one answers
// again (ProviderBack, its Options.OnBack), not when its wait ends. One
// waiting out an outage keeps its backoff: a provider failing part of its
// calls answers others, and waking on each would call it again at once.
func TestProviderBackWakesTheWaitingMessages(t *testing.T) {
	for _, tc := range []struct {
		kind  core.Kind
		woken bool
	}{{core.KindRateLimited, true}, {core.KindUnavailable, false}} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			ag := &failingAgent{err: &core.Error{Kind: tc.kind, Msg: "provider p: not now", RetryAfter: time.Minute}, failures: 1}
			r := newDelayRig(t, ag, gateway.Options{})
			r.accept("1", "hi")
			waiting := func() bool {
				it, st, err := r.db.QueueItem(context.Background(), 1)
				if err != nil {
					t.Fatal(err)
				}
				return st == core.StatusQueued && it.NotBefore.After(r.clk.Now())
			}
			for deadline := time.Now().Add(30 * time.Second); !waiting(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("request 1 never waited")
				}
			}
			r.g.ProviderBack("p")
			if !tc.woken {
				time.Sleep(200 * time.Millisecond)
				if !waiting() {
					t.Fatal("an outage's wait was cut short by a provider back")
				}
				return
			}
			got := r.sent(2)
			if !strings.HasPrefix(got[0], "⏳ Your answer is delayed") || got[1] != "answer to hi" {
				t.Fatalf("sent %q; want the delay notice, then the answer with the clock unmoved", got)
			}
		})
	}
}

// TestWaitEndsAtTheRoutersNextProbe: a message waiting out a cooldown
// comes back when the router says its next probe may find the provider
// back (core.Error.Recheck), when that is sooner than recheckEvery; a
// try before the probe finds out nothing.
func TestWaitEndsAtTheRoutersNextProbe(t *testing.T) {
	for _, tc := range []struct {
		recheck, want time.Duration
		// notice is the next try the user is told of: the router's
		// probe, not a wake before it that calls no provider.
		notice time.Duration
	}{
		{4 * time.Second, 4 * time.Second, 4 * time.Second},
		{0, 15 * time.Second, 0},                                   // no hint: recheckEvery
		{time.Minute, 15 * time.Second, time.Minute},               // later than recheckEvery
		{500 * time.Millisecond, 2 * time.Second, 2 * time.Second}, // at least the first backoff step
	} {
		t.Run(tc.recheck.String(), func(t *testing.T) {
			ag := &failingAgent{err: &core.Error{Kind: core.KindRateLimited, Msg: "cooling", RetryAfter: 100 * time.Second, Recheck: tc.recheck}, failures: 1}
			r := newDelayRig(t, ag, gateway.Options{})
			r.accept("1", "hi")
			r.nextTry()
			if r.waits[0] != tc.want {
				t.Fatalf("wait = %v; want %v", r.waits[0], tc.want)
			}
			got := r.sent(2)
			if got[1] != "answer to hi" {
				t.Fatalf("sent %q; want the answer last", got)
			}
			// The notice names the next try, not the cooldown's end, when
			// the router's probe comes sooner.
			if want := "I will try again in about " + core.HumanDuration(tc.notice); tc.notice > 0 && !strings.Contains(got[0], want) {
				t.Fatalf("notice %q; want %q", got[0], want)
			}
		})
	}
}

// TestStatusIsAnsweredBesideAWaitingMessage: while a message waits for a
// cooling provider, /status and /help are answered at once (they are
// aside commands), in the order they were sent (without it, /help came
// first 2 runs in 20), /status saying what waits; a plain message sent
// meanwhile keeps its place behind the waiting one. A command behind a
// message being answered waits its turn (TestCommandsRunInOrder covers
// the order otherwise).
func TestStatusIsAnsweredBesideAWaitingMessage(t *testing.T) {
	ag := &failingAgent{err: &core.Error{Kind: core.KindRateLimited, Msg: "provider p: 429", RetryAfter: time.Minute}, failures: 1}
	r := newDelayRig(t, ag, gateway.Options{})
	r.accept("1", "hi")
	waitDeferred(t, r, 1)
	if got := r.sent(1); !strings.HasPrefix(got[0], "⏳ Your answer is delayed") {
		t.Fatalf("sent %q; want the delay notice", got)
	}
	r.accept("2", "hello")
	r.accept("3", "/status")
	r.accept("4", "/help")
	got := r.sent(2)
	if !strings.Contains(got[0], "Waiting: 2 earlier messages, the first tried again in about 15 seconds") {
		t.Fatalf("/status answered %q; want it to say two messages wait, the first until the next check (15s)", got[0])
	}
	if !strings.HasPrefix(got[1], "I am an AI assistant.") {
		t.Fatalf("/help answered %q; want the list of commands", got[1])
	}
	r.nextTry()
	if got := r.sent(2); got[0] != "answer to hi" || got[1] != "answer to hello" {
		t.Fatalf("sent %q; want the waiting message's answer, then the next one's", got)
	}
}
