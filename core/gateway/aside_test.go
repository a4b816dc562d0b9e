package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
)

// pausedAgent holds its first call of "hi" and of every "block" until
// release is closed (telling started), then fails "hi" with err; other
// calls answer at once.
type pausedAgent struct {
	mu      sync.Mutex
	err     error
	hiCalls int
	started chan string
	release chan struct{}
}

func newPausedAgent(err error) *pausedAgent {
	return &pausedAgent{err: err, started: make(chan string, 4), release: make(chan struct{})}
}

func (a *pausedAgent) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	switch t.Text {
	case "hi":
		a.mu.Lock()
		a.hiCalls++
		first := a.hiCalls == 1
		a.mu.Unlock()
		if first {
			a.started <- t.Text
			<-a.release
			return core.Answer{}, a.err
		}
	case "block":
		a.started <- t.Text
		<-a.release
	}
	return core.Answer{Text: "answer to " + t.Text, Model: "fake/m"}, nil
}

// waitDeferred waits until queue item id waits for a later time.
func waitDeferred(t *testing.T, r *delayRig, id int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		it, st, err := r.db.QueueItem(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st == core.StatusQueued && it.NotBefore.After(r.clk.Now()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request %d is %s; want it waiting", id, st)
		}
	}
}

var rateLimited = &core.Error{Kind: core.KindRateLimited, Msg: "provider p: 429", RetryAfter: time.Minute}

// TestStatusSentWhileTheMessageIsTriedIsAnsweredOnceItWaits: /status
// sent while the message before it is being tried waits its turn; once
// that try fails and the message waits for the provider, /status is
// answered at once, not after the wait.
func TestStatusSentWhileTheMessageIsTriedIsAnsweredOnceItWaits(t *testing.T) {
	ag := newPausedAgent(rateLimited)
	r := newDelayRig(t, ag, gateway.Options{})
	r.accept("1", "hi")
	<-ag.started
	r.accept("2", "/status")
	close(ag.release)
	waitDeferred(t, r, 1)
	got := r.sent(2)
	if !strings.HasPrefix(got[0], "⏳") || !strings.Contains(got[1], "Waiting: 1 earlier message") {
		t.Fatalf("sent %q; want the delay notice, then /status's answer (the clock unmoved)", got)
	}
}

// TestAsideCommandsKeepTheirOrderWhenWorkersAreBusy: /status could not go
// aside (the only worker was busy elsewhere); /help, sent after it once
// the worker is free, is answered after it, not before.
func TestAsideCommandsKeepTheirOrderWhenWorkersAreBusy(t *testing.T) {
	ag := newPausedAgent(rateLimited)
	ag.hiCalls = 1 // "hi" fails through failingAgent below
	fa := &failingAgent{err: rateLimited, failures: 1}
	both := agentFunc(func(ctx context.Context, tn core.Turn) (core.Answer, error) {
		if tn.Text == "block" {
			return ag.Answer(ctx, tn)
		}
		return fa.Answer(ctx, tn)
	})
	r := newDelayRig(t, both, gateway.Options{Workers: 1})
	r.accept("1", "hi")
	waitDeferred(t, r, 1)
	if got := r.sent(1); !strings.HasPrefix(got[0], "⏳") {
		t.Fatalf("sent %q; want the delay notice", got)
	}
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "other"}, MessageID: "b", UserID: "u", Text: "block"}
	if err := r.g.Accept(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	<-ag.started
	r.accept("2", "/status")
	close(ag.release)
	if got := r.next(); got != "answer to block" {
		t.Fatalf("sent %q; want the other conversation's answer", got)
	}
	// Its worker is free again once the dispatcher has taken it back: a
	// command accepted before then finds no free worker, and waits its
	// turn (claimAsides).
	for deadline := time.Now().Add(10 * time.Second); !r.g.WorkersIdle(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker is still busy after the other conversation's answer")
		}
	}
	r.accept("3", "/help")
	if got := r.next(); !strings.HasPrefix(got, "Model:") {
		t.Fatalf("first answered %q; want /status's answer, sent first", got)
	}
	if got := r.next(); !strings.HasPrefix(got, "I am an AI assistant.") {
		t.Fatalf("then %q; want /help's answer", got)
	}
}

type agentFunc func(context.Context, core.Turn) (core.Answer, error)

func (f agentFunc) Answer(ctx context.Context, t core.Turn) (core.Answer, error) { return f(ctx, t) }
