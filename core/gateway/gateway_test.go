package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// fakeChannel splits replies at "|" and records every sent part. Send
// fails while failSends > 0.
type fakeChannel struct {
	mu        sync.Mutex
	sent      []string
	failSends int
	notify    chan string
	// hold, when set, holds every send until it is closed.
	hold chan struct{}
}

func (c *fakeChannel) Name() string                               { return "fake" }
func (c *fakeChannel) Run(ctx context.Context, _ core.Sink) error { <-ctx.Done(); return nil }
func (c *fakeChannel) Format(text string) []string                { return strings.Split(text, "|") }
func (c *fakeChannel) Close() error                               { return nil }
func (c *fakeChannel) Send(_ context.Context, to core.Outbound, part string) (string, error) {
	c.mu.Lock()
	hold := c.hold
	c.mu.Unlock()
	if hold != nil {
		<-hold
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failSends > 0 && to.Part > 0 {
		c.failSends--
		return "", &core.Error{Kind: core.KindUnavailable, Msg: "platform down"}
	}
	c.sent = append(c.sent, part)
	c.notify <- part
	return "p" + string(rune('0'+len(c.sent))), nil
}

// fakeAgent answers "answer to <text>" after failing `fail` times.
type fakeAgent struct {
	mu    sync.Mutex
	calls int
	fail  int
	kind  core.Kind
	text  func(string) string
	// retryAfter is the failures' RetryAfter (a provider cooling down).
	retryAfter time.Duration
}

func (a *fakeAgent) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.calls <= a.fail {
		return core.Answer{}, &core.Error{Kind: a.kind, Msg: "llm failed", RetryAfter: a.retryAfter}
	}
	text := "answer to " + t.Text
	if a.text != nil {
		text = a.text(t.Text)
	}
	return core.Answer{Text: text, Model: "fake/m", TaskType: "chat", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

type signals struct {
	mu  sync.Mutex
	got []core.Signal
}

func (s *signals) RecordSignal(_ context.Context, sig core.Signal) error {
	s.mu.Lock()
	s.got = append(s.got, sig)
	s.mu.Unlock()
	return nil
}

type rig struct {
	t  *testing.T
	db *store.DB
	g  *gateway.Gateway
	ch *fakeChannel

	sig  *signals
	stop func()
}

func newRig(t *testing.T, ag *fakeAgent, ch *fakeChannel, setup func(*gateway.Gateway)) *rig {
	t.Helper()
	return newRigWith(t, ag, ch, nil, setup)
}

// newRigWith is newRig with any agent and the given hooks.
func newRigWith(t *testing.T, ag core.Agent, ch *fakeChannel, hooks core.Hooks, setup func(*gateway.Gateway)) *rig {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if ch.notify == nil {
		ch.notify = make(chan string, 100)
	}
	sig := &signals{}
	g := gateway.New(gateway.Options{Store: db, Agent: ag, Hooks: hooks, Signals: sig, Workers: 2, MaxAttempts: 3,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	g.AddChannel(ch)
	if setup != nil {
		setup(g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	r := &rig{t: t, db: db, g: g, ch: ch, sig: sig}
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway run: %v", err)
		}
	}
	t.Cleanup(func() {
		if r.stop != nil {
			r.stop()
		}
	})
	return r
}

// openDB opens a fresh store that is closed when the test ends.
func openDB(t *testing.T, o store.Options) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// runOn runs a gateway built from o with one fake channel until the test
// ends; db is the store under o.Store (which may wrap it).
func runOn(t *testing.T, db *store.DB, o gateway.Options) *rig {
	t.Helper()
	ch := &fakeChannel{notify: make(chan string, 100)}
	return runWith(t, db, o, ch, ch)
}

// runWith runs a gateway built from o with channel ch until the test
// ends; fc is the fake channel ch is or wraps.
func runWith(t *testing.T, db *store.DB, o gateway.Options, ch core.Channel, fc *fakeChannel) *rig {
	t.Helper()
	g := gateway.New(o)
	g.AddChannel(ch)
	serve(t, g)
	return &rig{t: t, db: db, g: g, ch: fc}
}

// serve runs g until the test ends (its cleanups registered later run
// first, while g still runs).
func serve(t *testing.T, g *gateway.Gateway) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (r *rig) accept(id, text string) {
	r.t.Helper()
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: id, UserID: "u", Text: text}
	for i := 0; ; i++ {
		err := r.g.Accept(context.Background(), in)
		if err == nil {
			return
		}
		if !errors.Is(err, gateway.ErrNotAccepting) || i > 1000 {
			r.t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *rig) expect(want string) {
	r.t.Helper()
	select {
	case got := <-r.ch.notify:
		if got != want {
			r.t.Fatalf("sent %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		r.t.Fatalf("nothing sent; want %q", want)
	}
}

func TestTransientFailureIsRetried(t *testing.T) {
	ag := &fakeAgent{fail: 2, kind: core.KindUnavailable}
	r := newRig(t, ag, &fakeChannel{}, nil)
	r.accept("1", "hello")
	r.expect("answer to hello")
	if ag.calls != 3 {
		t.Fatalf("agent called %d times; want 3 (two failures, then the answer)", ag.calls)
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	ag := &fakeAgent{fail: 100, kind: core.KindUnavailable}
	r := newRig(t, ag, &fakeChannel{}, nil)
	r.accept("1", "hello")
	select {
	case got := <-r.ch.notify:
		if !strings.Contains(got, "not answering right now") {
			t.Fatalf("error reply = %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error reply after the last attempt")
	}
	r.stop()
	r.stop = nil
	counts, _ := r.db.QueueCounts(context.Background())
	if counts[core.StatusFailed] != 1 || ag.calls != 3 {
		t.Fatalf("counts=%v calls=%d; want one failed request after 3 attempts", counts, ag.calls)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	ag := &fakeAgent{fail: 1, kind: core.KindContextTooLong}
	r := newRig(t, ag, &fakeChannel{}, nil)
	r.accept("1", "hello")
	r.expect(core.UserMessage(&core.Error{Kind: core.KindContextTooLong}))
	r.accept("2", "next")
	r.expect("answer to next")
	if ag.calls != 2 {
		t.Fatalf("agent called %d times; a context-too-long failure must not be retried", ag.calls)
	}
}

func TestDeliveryResumesWithoutAskingAgain(t *testing.T) {
	ag := &fakeAgent{text: func(string) string { return "one|two|three" }}
	ch := &fakeChannel{failSends: 1}
	r := newRig(t, ag, ch, nil)
	r.accept("1", "long")
	r.expect("one")
	r.expect("two")
	r.expect("three")
	if ag.calls != 1 {
		t.Fatalf("agent called %d times; a failed send must resume delivery, not re-ask the LLM", ag.calls)
	}
	if len(ch.sent) != 3 {
		t.Fatalf("sent %v; want each part exactly once", ch.sent)
	}
}

func TestCommandsAreAnsweredByCore(t *testing.T) {
	ag := &fakeAgent{}
	r := newRig(t, ag, &fakeChannel{}, nil)
	r.accept("1", "/nosuch")
	r.expect("Unknown command /nosuch. Send /help for the list of commands.")
	r.accept("2", "/model@talon_bot")
	r.expect("Model: unknown (no router)")
	if ag.calls != 0 {
		t.Fatal("a command reached the agent")
	}
}

// escalate answers every judged reaction with a note.
type escalate struct{}

func (escalate) Intercept(context.Context, core.CommandRequest) (core.Decision, error) {
	return core.Decision{}, nil
}
func (escalate) InterceptReaction(_ context.Context, re core.Reaction, judged *core.Reply, _ core.Session) (core.Decision, error) {
	return core.Decision{Reply: "better answer than " + judged.Text}, nil
}

func TestReactionBecomesSignalAndMayBeAnswered(t *testing.T) {
	r := newRig(t, &fakeAgent{}, &fakeChannel{}, func(g *gateway.Gateway) { g.AddInterceptor(escalate{}) })
	r.accept("1", "q")
	r.expect("answer to q")
	conv := core.ConversationKey{Channel: "fake", Chat: "c"}
	react := func(id, msg string, p core.Polarity) {
		if err := r.g.React(context.Background(), core.Reaction{Conversation: conv, EventID: id, MessageID: msg, UserID: "u", Emoji: "x", Added: true, Polarity: p}); err != nil {
			t.Fatal(err)
		}
	}
	react("r0", "not-ours", core.Negative) // ignored: not a bot message
	react("r1", "p1", core.Negative)
	r.expect("better answer than answer to q")
	r.sig.mu.Lock()
	if len(r.sig.got) != 1 || r.sig.got[0].Polarity != core.Negative || r.sig.got[0].Model != "fake/m" {
		t.Fatalf("signals = %+v; want one negative signal for the judged reply", r.sig.got)
	}
	r.sig.mu.Unlock()
	// Taken back: the same verdict with a negative weight (not a 👍), and
	// no answer again.
	if err := r.g.React(context.Background(), core.Reaction{Conversation: conv, EventID: "r2", MessageID: "p1", UserID: "u", Emoji: "x", Added: false, Polarity: core.Negative}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		r.sig.mu.Lock()
		n := len(r.sig.got)
		r.sig.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the withdrawal recorded no signal")
		}
	}
	select {
	case got := <-r.ch.notify:
		t.Fatalf("sent %q after the reaction was taken back; want nothing", got)
	default:
	}
	r.sig.mu.Lock()
	defer r.sig.mu.Unlock()
	if s := r.sig.got[1]; s.Polarity != core.Negative || s.Weight != -1 || s.Model != "fake/m" {
		t.Fatalf("withdrawal's signal = %+v; want the negative verdict with weight -1", s)
	}
}

func TestPanicFailsOnlyThatRequest(t *testing.T) {
	ag := &fakeAgent{text: func(q string) string {
		if q == "boom" {
			panic("agent bug")
		}
		return "fine"
	}}
	r := newRig(t, ag, &fakeChannel{}, nil)
	r.accept("1", "boom")
	r.expect("Sorry, I could not answer that: an internal error occurred (logged)")
	r.accept("2", "next")
	r.expect("fine")
}

func TestInterruptedTooOftenIsNotRetried(t *testing.T) {
	ag := &fakeAgent{}
	dir := t.TempDir()
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "fake", Chat: "c"}
	in := core.Inbound{Conversation: conv, MessageID: "poison", Text: "crashes the process"}
	// Three starts that each died while the message was running: each a
	// process alone on the database, whose first claim takes back what
	// the one before left.
	for i := range 3 {
		db, err := store.Open(ctx, dir, store.Options{SoleClaimer: true})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage, Conversation: conv, DedupeKey: "fake:m:poison", Message: &in})
		}
		if items, _, err := db.Claim(ctx, 1, time.Now()); err != nil || len(items) != 1 || items[0].Interruptions != i {
			t.Fatalf("start %d claimed %+v, %v", i, items, err)
		}
		db.Close()
	}
	db, err := store.Open(ctx, dir, store.Options{SoleClaimer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ch := &fakeChannel{notify: make(chan string, 10)}
	g := gateway.New(gateway.Options{Store: db, Agent: ag, MaxAttempts: 3})
	g.AddChannel(ch)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- g.Run(runCtx, time.Second) }()
	select {
	case got := <-ch.notify:
		if !strings.Contains(got, "gave up after") {
			t.Fatalf("reply = %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply for the poison message")
	}
	cancel()
	<-done
	if ag.calls != 0 {
		t.Fatal("a message interrupted max_attempts times reached the agent again")
	}
}

// TestPostSendsToAnEnabledChannel: Post (a chat sink's event) goes out
// through the channel's own formatting, every part, and names a channel
// that is not enabled.
func TestPostSendsToAnEnabledChannel(t *testing.T) {
	ch := &fakeChannel{notify: make(chan string, 10)}
	g := gateway.New(gateway.Options{})
	g.AddChannel(ch)
	if !g.HasChannel("fake") || g.HasChannel("slack") {
		t.Fatalf("HasChannel(fake, slack) = %v, %v; want true, false", g.HasChannel("fake"), g.HasChannel("slack"))
	}
	if err := g.Post(context.Background(), core.ConversationKey{Channel: "fake", Chat: "ops"}, "down|since 5m"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ch.sent, ","); got != "down,since 5m" {
		t.Fatalf("sent %q; want both parts", got)
	}
	err := g.Post(context.Background(), core.ConversationKey{Channel: "slack", Chat: "ops"}, "x")
	if err == nil || !strings.Contains(err.Error(), "slack is not enabled") {
		t.Fatalf("post to slack: %v; want it named as not enabled", err)
	}
	ch.failSends = 1
	if err := g.Post(context.Background(), core.ConversationKey{Channel: "fake", Chat: "ops"}, "a|b"); core.ErrorKind(err) != core.KindUnavailable {
		t.Fatalf("post with a failing send: %v; want the channel's error", err)
	}
}

// outage is a channel whose first down sends fail the way a platform in
// passing trouble fails them (a 5xx, a broken connection).
type outage struct {
	fakeChannel
	down int
	// unknown fails the sends with an error of no known kind.
	unknown bool
}

func (c *outage) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	c.mu.Lock()
	if c.down > 0 {
		c.down--
		unknown := c.unknown
		c.mu.Unlock()
		if unknown {
			return "", errors.New("something the channel did not classify")
		}
		return "", &core.Error{Kind: core.KindUnavailable, Msg: "platform down"}
	}
	c.mu.Unlock()
	return c.fakeChannel.Send(ctx, to, part)
}

// runOutage runs a gateway with ch, three attempts and a 1 ms backoff
// (and what set changes of those options).
func runOutage(t *testing.T, db *store.DB, ag *fakeAgent, ch *outage, set ...func(*gateway.Options)) *rig {
	t.Helper()
	o := gateway.Options{Store: db, Agent: ag, Workers: 2, MaxAttempts: 3,
		Backoff: func(int) time.Duration { return time.Millisecond }}
	for _, f := range set {
		f(&o)
	}
	return runWith(t, db, o, ch, &ch.fakeChannel)
}

// TestPlatformOutageLosesNoAnswerNorApology: while the platform refuses
// every send for longer than queue.max_attempts tries, a stored answer
// waits to be delivered, and so does the apology of a message that failed
// for good; neither is dropped with its request marked done or failed.
// (Before, the third failed send gave the request up, the stored answer
// was tried once more, and the request was failed with nothing sent.)
func TestPlatformOutageLosesNoAnswerNorApology(t *testing.T) {
	for _, tc := range []struct {
		name   string
		agent  *fakeAgent
		want   string
		status string
		calls  int
	}{
		{"answer", &fakeAgent{}, "answer to hello", core.StatusDone, 1},
		{"apology", &fakeAgent{fail: 100, kind: core.KindContextTooLong}, core.UserMessage(&core.Error{Kind: core.KindContextTooLong}), core.StatusFailed, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, store.Options{})
			r := runOutage(t, db, tc.agent, &outage{fakeChannel: fakeChannel{notify: make(chan string, 100)}, down: 6})
			r.accept("1", "hello")
			r.expect(tc.want)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				st, _, _, _ := db.QueueStatus(context.Background(), 1)
				if st == tc.status {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("request 1 is %s after its text was sent; want %s", st, tc.status)
				}
			}
			tc.agent.mu.Lock()
			calls := tc.agent.calls
			tc.agent.mu.Unlock()
			if tc.calls > 0 && calls != tc.calls {
				t.Fatalf("the agent was asked %d times; a stored answer is only delivered again", calls)
			}
		})
	}
}

// TestWaitGivenUpWithApologyPutBackIsRetried: a message that waited out
// queue.max_wait for its provider is given up; when the platform fails
// the apology for the moment, the item goes back to the queue, and the
// attempt's outcome (requests_total) is "retried", not "waiting".
func TestWaitGivenUpWithApologyPutBackIsRetried(t *testing.T) {
	db := openDB(t, store.Options{})
	obs := &countingObserver{accepted: map[string]int{}, stages: map[core.Stage]int{}, outcomes: map[core.Outcome]int{}}
	ag := &fakeAgent{fail: 1 << 30, kind: core.KindRateLimited, retryAfter: time.Millisecond}
	r := runOutage(t, db, ag, &outage{fakeChannel: fakeChannel{notify: make(chan string, 100)}, down: 2}, func(o *gateway.Options) {
		o.Observer, o.MaxWait = obs, time.Nanosecond
	})
	r.accept("1", "hello")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		st, _, _, _ := db.QueueStatus(context.Background(), 1)
		if st == core.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("request 1 is %s; want it failed once its apology was sent", st)
		}
	}
	// The outcome is counted after the item's row is written: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		obs.mu.Lock()
		n := obs.outcomes[core.OutcomeFailed]
		obs.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.outcomes[core.OutcomeRetried] != 2 || obs.outcomes[core.OutcomeFailed] != 1 || obs.outcomes[core.OutcomeWaiting] != 0 {
		t.Fatalf("outcomes %v; want 2 retried (the apology failed twice), then 1 failed", obs.outcomes)
	}
}

// TestUnknownSendFailureIsNotRetriedForever: a send failure of no known
// kind promises nothing: the request goes the way of any failure
// (queue.max_attempts) and does not hold its conversation for ever.
func TestUnknownSendFailureIsNotRetriedForever(t *testing.T) {
	db := openDB(t, store.Options{})
	r := runOutage(t, db, &fakeAgent{}, &outage{fakeChannel: fakeChannel{notify: make(chan string, 100)}, down: 1 << 30, unknown: true})
	r.accept("1", "hello")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		st, attempts, _, _ := db.QueueStatus(context.Background(), 1)
		if st == core.StatusFailed {
			break
		}
		if time.Now().After(deadline) || attempts > 10 {
			t.Fatalf("request 1 is %s after %d attempts; want it failed after queue.max_attempts", st, attempts)
		}
	}
}
