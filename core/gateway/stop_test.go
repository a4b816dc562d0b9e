package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// stoppableAgent answers "slow" only when its context ends (an answer being
// written that /stop must end), and everything else at once.
type stoppableAgent struct {
	mu      sync.Mutex
	calls   map[string]int
	started chan string
}

func (a *stoppableAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	a.calls[t.Text]++
	a.mu.Unlock()
	a.started <- t.Text
	if t.Text == "slow" {
		<-ctx.Done()
		return core.Answer{}, ctx.Err()
	}
	text := "answer to " + t.Text
	return core.Answer{Text: text, Model: "fake/m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// TestStopEndsTheAnswerBeingWritten: /stop sent while an answer is being
// written ends it (not tried again, nothing sent for it) and says so; the
// next message is answered as usual, and /stop with nothing under way
// says there was nothing to stop.
func TestStopEndsTheAnswerBeingWritten(t *testing.T) {
	ag := &stoppableAgent{calls: map[string]int{}, started: make(chan string, 10)}
	r := newRigWith(t, ag, &fakeChannel{}, nil, nil)
	r.accept("1", "slow")
	select {
	case got := <-ag.started:
		if got != "slow" {
			t.Fatalf("the agent was asked %q first", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was never asked")
	}
	r.accept("2", "/stop")
	r.expect("Stopped. Send a message when you want me to go on.")
	r.accept("3", "next")
	r.expect("answer to next")
	// Once that answer is recorded as done (queue item 3), a /stop finds
	// nothing under way.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, st, _ := r.db.QueueItem(context.Background(), 3); st == core.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answer to the next message was never recorded as done")
		}
	}
	r.accept("4", "/stop")
	r.expect("Nothing to stop: no answer was being written here.")
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if n := ag.calls["slow"]; n != 1 {
		t.Fatalf("the stopped message was asked %d times; want once (not tried again)", n)
	}
}

// heldChannel is fakeChannel whose send of held waits until release is
// closed (telling started), failing as a platform's call does when its
// context ends first.
type heldChannel struct {
	*fakeChannel
	held    string
	started chan struct{}
	release chan struct{}
}

func (c *heldChannel) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	if part == c.held {
		close(c.started)
		select {
		case <-c.release:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
	return c.fakeChannel.Send(ctx, to, part)
}

// TestStopLeavesAnAnswerAlreadyWritten: /stop sent while a written
// answer is being sent (stored, its history kept in full) does not cut
// its delivery: every part reaches the user, and /stop says there was
// nothing to stop.
func TestStopLeavesAnAnswerAlreadyWritten(t *testing.T) {
	db := openDB(t, store.Options{})
	fc := &fakeChannel{notify: make(chan string, 100)}
	ch := &heldChannel{fakeChannel: fc, held: "first part", started: make(chan struct{}), release: make(chan struct{})}
	ag := &fakeAgent{text: func(string) string { return "first part|second part" }}
	r := runWith(t, db, gateway.Options{Store: db, Agent: ag, Workers: 2, MaxAttempts: 3}, ch, fc)
	r.accept("1", "question")
	<-ch.started // the answer is written and stored; its first part is being sent
	r.accept("2", "/stop")
	close(ch.release)
	r.expect("first part")
	r.expect("second part")
	r.expect("Nothing to stop: no answer was being written here.")
}

// TestStopLeavesACommandAnsweredAside: /stop does not cut a command
// answered aside while the message before it waits for a provider (no
// answer is being written): the command answers, then /stop says
// nothing is being written.
func TestStopLeavesACommandAnsweredAside(t *testing.T) {
	ag := &fakeAgent{fail: 1, kind: core.KindRateLimited, retryAfter: time.Hour}
	started, release := make(chan struct{}), make(chan struct{})
	r := newRig(t, ag, &fakeChannel{}, func(g *gateway.Gateway) {
		g.AddCommand(core.Command{CommandInfo: core.CommandInfo{Name: "slow", Usage: "/slow"}, Aside: true,
			Run: func(ctx context.Context, _ core.CommandRequest) (string, error) {
				close(started)
				select {
				case <-release:
					return "slow answered", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}})
	})
	r.accept("1", "hi")
	if got := r.next(); !strings.HasPrefix(got, "⏳") {
		t.Fatalf("sent %q; want the delay notice of the message waiting for the provider", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, st, _ := r.db.QueueItem(context.Background(), 1); st == core.StatusQueued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message never went back to wait")
		}
	}
	r.accept("2", "/slow")
	<-started
	r.accept("3", "/stop")
	close(release)
	r.expect("slow answered")
	if got := r.next(); !strings.HasPrefix(got, "Nothing is being written now") {
		t.Fatalf("/stop answered %q; want that nothing is being written", got)
	}
}

// TestStopSaysItStoppedPastAMessageSentBetween: a message sent while the
// answer streams, then /stop: the answer is stopped, the message
// answered, and /stop, answered after it, still says it stopped.
func TestStopSaysItStoppedPastAMessageSentBetween(t *testing.T) {
	ag := &stoppableAgent{calls: map[string]int{}, started: make(chan string, 10)}
	r := newRigWith(t, ag, &fakeChannel{}, nil, nil)
	r.accept("1", "slow")
	if got := <-ag.started; got != "slow" {
		t.Fatalf("the agent was asked %q first", got)
	}
	r.accept("2", "meanwhile")
	r.accept("3", "/stop")
	r.expect("answer to meanwhile")
	r.expect("Stopped. Send a message when you want me to go on.")
}

// drafting streams natively as Telegram's drafts do: a draft is no
// message (ShowDraft returns "") until it ends.
type drafting struct {
	seen chan string
}

func (c *drafting) Name() string                               { return "fake" }
func (c *drafting) Run(ctx context.Context, _ core.Sink) error { <-ctx.Done(); return nil }
func (c *drafting) Format(text string) []string                { return []string{text} }
func (c *drafting) Close() error                               { return nil }
func (c *drafting) Streaming(core.Outbound) core.StreamPolicy {
	return core.StreamPolicy{Mode: core.StreamNative}
}
func (c *drafting) Draft(text string) []core.DraftPart {
	return []core.DraftPart{{Raw: text, Part: text}}
}
func (c *drafting) Edit(_ context.Context, _ core.Outbound, id, part string) error {
	c.seen <- "edit " + id + " " + part
	return nil
}
func (c *drafting) Send(_ context.Context, _ core.Outbound, part string) (string, error) {
	c.seen <- "send " + part
	return "m", nil
}
func (c *drafting) ShowDraft(_ context.Context, _ core.Outbound, d core.NativeDraft) (string, error) {
	c.seen <- "draft " + d.Part
	return "", nil
}
func (c *drafting) EndDraft(_ context.Context, _ core.Outbound, _ core.NativeDraft, part string) (string, error) {
	c.seen <- "end " + part
	return "m", nil
}

// TestStopKeepsWhatANativeDraftShowed: an answer streamed as a native
// draft (no message until it ends) and stopped keeps what it showed: the
// draft is ended as a message, before /stop answers.
func TestStopKeepsWhatANativeDraftShowed(t *testing.T) {
	ch := &drafting{seen: make(chan string, 10)}
	ag := writer{deltas: make(chan string)}
	db := openDB(t, store.Options{})
	g := gateway.New(gateway.Options{Store: db, Agent: ag})
	g.AddChannel(ch)
	serve(t, g)
	accept := func(id, text string) {
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: id, UserID: "u", Text: text}
		for g.Accept(context.Background(), in) != nil {
			time.Sleep(time.Millisecond)
		}
	}
	next := func() string {
		t.Helper()
		select {
		case got := <-ch.seen:
			return got
		case <-time.After(10 * time.Second):
			t.Fatal("nothing shown")
		}
		return ""
	}
	accept("1", "tell me")
	ag.deltas <- "Once upon"
	if got := next(); got != "draft Once upon" {
		t.Fatalf("shown %q; want the draft", got)
	}
	accept("2", "/stop")
	if got := next(); got != "end Once upon" {
		t.Fatalf("then %q; want the draft ended showing what it showed", got)
	}
	if got := next(); got != "send Stopped. Send a message when you want me to go on." {
		t.Fatalf("then %q; want /stop's answer", got)
	}
}

// /stop is taken when the conversation already holds queue.max_pending
// messages: that is when it is most wanted.
func TestStopIsTakenWhenTheConversationIsFull(t *testing.T) {
	db := openDB(t, store.Options{})
	ag := &stoppableAgent{calls: map[string]int{}, started: make(chan string, 10)}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, MaxPending: 1})
	r.accept("1", "slow")
	select {
	case <-ag.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was never asked")
	}
	r.accept("2", "more") // refused: the conversation is full
	if got := r.next(); !strings.Contains(got, "did not take this one") {
		t.Fatalf("sent %q; want the notice that the conversation is full", got)
	}
	r.accept("3", "/stop")
	r.expect("Stopped. Send a message when you want me to go on.")
}
