package gateway_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// tagHooks tags every answer after the agent, and drops or answers by
// rule before it.
type tagHooks struct {
	mu   sync.Mutex
	pre  []core.HookInput
	post []string
}

func (h *tagHooks) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	h.mu.Lock()
	h.pre = append(h.pre, in)
	h.mu.Unlock()
	switch {
	case strings.Contains(in.Text, "forbidden"):
		return core.PreResult{Drop: true, Reason: "policy", Reply: "I cannot help with that."}, nil
	case strings.Contains(in.Text, "spam"):
		return core.PreResult{Drop: true, Reason: "spam"}, nil
	}
	return core.PreResult{Text: strings.ReplaceAll(in.Text, "colour", "color"), Metadata: map[string]string{"lang": "en"}}, nil
}

func (h *tagHooks) Post(_ context.Context, in core.HookInput, answer string) (string, error) {
	h.mu.Lock()
	h.post = append(h.post, in.Metadata["lang"])
	h.mu.Unlock()
	return answer + " [checked]", nil
}

// retryer re-answers "again" by a turn override, like routing's
// escalator: the previous question, with a note.
type retryer struct{}

func (retryer) Intercept(_ context.Context, req core.CommandRequest) (core.Decision, error) {
	if req.In.Text != "again" {
		return core.Decision{}, nil
	}
	return core.Decision{Turn: &core.TurnOverride{Text: "q", Retry: true, Exclude: []string{"fake/m"},
		Finish: func(a *core.Answer) { a.Text = "↻ " + a.Text }}}, nil
}

func (retryer) InterceptReaction(_ context.Context, _ core.Reaction, judged *core.Reply, _ core.Session) (core.Decision, error) {
	return core.Decision{Turn: &core.TurnOverride{Text: "q", Retry: true, Exclude: []string{judged.Model},
		Finish: func(a *core.Answer) { a.Text = "👎↻ " + a.Text }}}, nil
}

func TestEveryAnswerPassesTheHooks(t *testing.T) {
	h := &tagHooks{}
	ag := &fakeAgent{}
	var turns []core.Turn
	ag.text = func(q string) string { return "answer to " + q }
	r := newRigWith(t, &recordingAgent{fakeAgent: ag, turns: &turns}, &fakeChannel{}, h, func(g *gateway.Gateway) { g.AddInterceptor(retryer{}) })
	r.accept("1", "q")
	r.expect("answer to q [checked]")
	r.accept("2", "again")
	r.expect("↻ answer to q [checked]")
	if err := r.g.React(context.Background(), core.Reaction{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, EventID: "r1", MessageID: "p1", UserID: "u", Added: true, Polarity: core.Negative}); err != nil {
		t.Fatal(err)
	}
	r.expect("👎↻ answer to q [checked]")
	r.accept("3", "the colour")
	r.expect("answer to the color [checked]")
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if len(turns) != 4 || !turns[1].Retry || turns[1].Exclude[0] != "fake/m" || !turns[2].Retry || turns[3].Metadata["lang"] != "en" {
		t.Fatalf("turns = %+v", turns)
	}
	if len(h.post) != 4 {
		t.Fatalf("post-hooks ran %d times, want 4 (first answer, retry, re-answer, rewritten)", len(h.post))
	}
}

func TestPreHookDropAndDirectReply(t *testing.T) {
	ag := &fakeAgent{}
	r := newRigWith(t, ag, &fakeChannel{}, &tagHooks{}, nil)
	r.accept("1", "something forbidden")
	r.expect("I cannot help with that.")
	r.accept("2", "buy spam now")
	r.accept("3", "hello")
	r.expect("answer to hello [checked]") // nothing was sent for the spam
	if ag.calls != 1 {
		t.Fatalf("agent called %d times; dropped and hook-answered messages must not reach the LLM", ag.calls)
	}
	r.stop()
	r.stop = nil
	counts, _ := r.db.QueueCounts(context.Background())
	if counts[core.StatusDone] != 3 {
		t.Fatalf("queue = %v, want 3 done (a drop is done, not failed)", counts)
	}
}

// recordingAgent records the turns it answers.
type recordingAgent struct {
	*fakeAgent
	turns *[]core.Turn
}

func (a *recordingAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	*a.turns = append(*a.turns, t)
	a.mu.Unlock()
	return a.fakeAgent.Answer(ctx, t)
}

// slowChannel holds every Send until released, like a channel waiting
// for its platform's pace.
type slowChannel struct {
	fakeChannel
	release chan struct{}
}

func (c *slowChannel) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	select {
	case <-c.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return c.fakeChannel.Send(ctx, to, part)
}

// TestPacedDeliveryDoesNotHoldAWorker: with one worker, a reply waiting
// for the platform does not keep the next conversation's message from
// reaching the agent.
func TestPacedDeliveryDoesNotHoldAWorker(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	asked := make(chan string, 10)
	ag := &fakeAgent{text: func(q string) string { asked <- q; return "answer to " + q }}
	ch := &slowChannel{fakeChannel: fakeChannel{notify: make(chan string, 10)}, release: make(chan struct{})}
	g := gateway.New(gateway.Options{Store: db, Agent: ag, Workers: 1})
	g.AddChannel(ch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	r := &rig{t: t, g: g, ch: &ch.fakeChannel}
	for i, chat := range []string{"a", "b"} {
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: chat}, MessageID: chat, Text: "q" + chat}
		for g.Accept(ctx, in) != nil {
			time.Sleep(time.Millisecond)
		}
		select {
		case q := <-asked:
			if q != "q"+chat {
				t.Fatalf("agent asked %q", q)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d did not reach the agent while the reply before it waited to be sent", i+1)
		}
	}
	close(ch.release)
	r.expectAny("answer to qa", "answer to qb")
	r.expectAny("answer to qa", "answer to qb")
	cancel()
	<-done
}

func (r *rig) expectAny(want ...string) {
	r.t.Helper()
	select {
	case got := <-r.ch.notify:
		for _, w := range want {
			if got == w {
				return
			}
		}
		r.t.Fatalf("sent %q, want one of %q", got, want)
	case <-time.After(30 * time.Second):
		r.t.Fatalf("nothing sent; want one of %q", want)
	}
}

// flaky is a channel whose Run fails until ok is closed.
type flaky struct {
	fakeChannel
	name string
	kind core.Kind
	runs chan struct{}
	ok   chan struct{}
}

func (c *flaky) Name() string { return c.name }
func (c *flaky) Run(ctx context.Context, _ core.Sink) error {
	c.runs <- struct{}{}
	select {
	case <-c.ok:
		<-ctx.Done()
		return nil
	default:
		return &core.Error{Kind: c.kind, Msg: "connection refused"}
	}
}

func TestFailingChannelIsRestartedAndReported(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fl := &flaky{name: "flaky", kind: core.KindUnavailable, runs: make(chan struct{}, 100), ok: make(chan struct{})}
	good := &fakeChannel{notify: make(chan string, 10)}
	g := gateway.New(gateway.Options{Store: db, Agent: &fakeAgent{}, ChannelBackoff: func(int) time.Duration { return 5 * time.Millisecond }})
	g.AddChannel(fl)
	g.AddChannel(good)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, time.Second) }()
	for range 3 {
		select {
		case <-fl.runs:
		case <-time.After(10 * time.Second):
			t.Fatal("the failing channel was not restarted")
		}
	}
	var st gateway.ChannelState
	for _, s := range g.ChannelStates() {
		if s.Name == "flaky" {
			st = s
		}
	}
	if st.Err == nil || st.Restarts < 2 || !strings.Contains(st.Err.Error(), "connection refused") {
		t.Fatalf("state = %+v, want the failure reported with its restarts", st)
	}
	// The other channel keeps answering.
	r := &rig{t: t, g: g, ch: good}
	r.accept("1", "still there?")
	r.expect("answer to still there?")
	close(fl.ok)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil: a failing channel must not stop the gateway", err)
	}
}

// sharedStore is a store shared with other replicas as far as /stop
// goes (core.Stopper): it hears their stops on a channel of its own.
type sharedStore struct {
	*store.DB
	stops chan core.ConversationKey
}

func (s sharedStore) RequestStop(context.Context, core.ConversationKey) error { return nil }
func (s sharedStore) StopRequests() <-chan core.ConversationKey               { return s.stops }

func TestRefusedCredentialStopsTheGateway(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "with other replicas"}[shared], func(t *testing.T) {
			refusedCredentialStops(t, shared)
		})
	}
}

// refusedCredentialStops: a channel whose credential is refused stops
// the gateway's Run, on a store of its own or one shared with replicas
// whose stops it listens for.
func refusedCredentialStops(t *testing.T, shared bool) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fl := &flaky{name: "flaky", kind: core.KindAuth, runs: make(chan struct{}, 100), ok: make(chan struct{})}
	var st core.Store = db
	if shared {
		st = sharedStore{DB: db, stops: make(chan core.ConversationKey)}
	}
	g := gateway.New(gateway.Options{Store: st, Agent: &fakeAgent{}})
	g.AddChannel(fl)
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background(), time.Second) }()
	select {
	case err := <-done:
		if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channel flaky") {
			t.Fatalf("Run = %v, want the channel's auth error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a refused credential did not stop the gateway")
	}
}

// The metadata the pre-hooks attached is stored with the reply.
func TestPreHookMetadataStoredWithReply(t *testing.T) {
	r := newRigWith(t, &fakeAgent{}, &fakeChannel{}, &tagHooks{}, nil)
	r.accept("1", "the colour")
	r.expect("answer to the color [checked]")
	ctx := context.Background()
	sess, err := r.db.ActiveSession(ctx, core.ConversationKey{Channel: "fake", Chat: "c"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.db.LastReply(ctx, sess.ID)
	if err != nil || rep == nil || rep.Metadata["lang"] != "en" {
		t.Fatalf("stored reply = %+v err=%v, want metadata lang=en", rep, err)
	}
}

// refusedAtStop is a channel whose platform refuses its credential just
// as the gateway is stopped.
type refusedAtStop struct{ fakeChannel }

func (c *refusedAtStop) Name() string { return "refused" }
func (c *refusedAtStop) Run(ctx context.Context, _ core.Sink) error {
	<-ctx.Done()
	return &core.Error{Kind: core.KindAuth, Msg: "token refused"}
}

// A refusal that comes with the stop (SIGTERM) still fails the run: a
// start that failed must not end as a clean stop (exit 0).
func TestRefusedCredentialAtStopFailsTheRun(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 20; i++ {
		g := gateway.New(gateway.Options{Store: db, Agent: &fakeAgent{}})
		g.AddChannel(&refusedAtStop{})
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 0 {
			cancel() // stopped before the channel ran
		} else {
			time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
		}
		err := g.Run(ctx, time.Second)
		cancel()
		if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channel refused") {
			t.Fatalf("round %d: Run = %v, want the channel's refusal", i, err)
		}
	}
}

// connecting is a flaky channel that says when it connected
// (core.ConnectionReporter) once its Run works.
type connecting struct {
	flaky
	mu        sync.Mutex
	connected time.Time
}

// Run is flaky's, deciding once whether it works: a Run that checked ok
// before it was closed and flaky's after would run on without saying it
// connected.
func (c *connecting) Run(ctx context.Context, _ core.Sink) error {
	c.runs <- struct{}{}
	select {
	case <-c.ok:
		c.mu.Lock()
		c.connected = time.Now()
		c.mu.Unlock()
		<-ctx.Done()
		return nil
	default:
		return &core.Error{Kind: c.kind, Msg: "connection refused"}
	}
}

func (c *connecting) ConnectedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// A channel restarted after failures that says it connected again is
// ready at once (/readyz), not 30 s later.
func TestRestartedChannelThatConnectedIsReady(t *testing.T) {
	db := openDB(t, store.Options{})
	fl := &connecting{flaky: flaky{name: "flaky", kind: core.KindUnavailable, runs: make(chan struct{}, 100), ok: make(chan struct{})}}
	g := gateway.New(gateway.Options{Store: db, Agent: &fakeAgent{}, ChannelBackoff: func(int) time.Duration { return 5 * time.Millisecond }})
	g.AddChannel(fl)
	serve(t, g)
	state := func() gateway.ChannelState {
		for _, s := range g.ChannelStates() {
			if s.Name == "flaky" {
				return s
			}
		}
		t.Fatal("no state for the channel")
		return gateway.ChannelState{}
	}
	<-fl.runs
	<-fl.runs // failed once, restarted
	close(fl.ok)
	for deadline := time.Now().Add(10 * time.Second); fl.ConnectedAt().IsZero(); time.Sleep(time.Millisecond) {
		select {
		case <-fl.runs:
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the channel never ran again")
		}
	}
	if st := state(); st.Err != nil {
		t.Fatalf("state = %+v; want ready: the channel connected after its restart", st)
	}
}

// The quoted context of a message is cleaned as its text is: a NUL byte
// or bytes that are not UTF-8 in a quoted message would reach the LLM
// and be refused by PostgreSQL when the turn (its prompt) is stored.
func TestQuotedContextIsCleanedLikeTheText(t *testing.T) {
	// The agent answers with what it was given, escaped (the answer is
	// cleaned before it is sent).
	r := newRig(t, &fakeAgent{text: strconv.QuoteToASCII}, &fakeChannel{}, nil)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "1", UserID: "u",
		Context: "> a\x00b\xff\n\nThe message to answer:\n", Text: "hi"}
	r.acceptIn(in)
	r.expect(strconv.QuoteToASCII("> ab\uFFFD\n\nThe message to answer:\nhi"))
}
