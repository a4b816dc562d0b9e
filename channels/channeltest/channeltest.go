package channeltest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
)

// Event is a platform event a fake delivered, as its Instance knows it.
type Event any

// Caps says which parts of the contract a platform can be driven through;
// the checks that need a missing capability are skipped with the reason.
type Caps struct {
	// Acks: the platform confirms delivered events (Acked works) and
	// delivers an unconfirmed event again by itself.
	Acks bool
	// Redeliver: the fake can deliver the same event a second time.
	Redeliver bool
	// Reactions: the fake can deliver a reaction (React works).
	Reactions bool
	// Users: the fake can deliver messages from more than one user, and
	// the channel applies allow_users.
	Users bool
}

// Platform starts instances of one channel against its fake platform.
type Platform interface {
	// Start builds the channel (not yet running) against a fresh fake,
	// with the platform's default common block except allow_users; the
	// fake stops when the test ends. 👍 and 👎 must be signals.
	Start(t *testing.T, allowUsers []string) Instance
}

// Instance is one channel and its fake.
type Instance interface {
	Channel() core.Channel
	Caps() Caps
	// UserID is the platform id of test user name ("alice", "bob"): what
	// allow_users lists.
	UserID(name string) string
	// Message makes the fake deliver a one-to-one message from user name.
	Message(t *testing.T, from, text string) Event
	// Redeliver makes the fake deliver ev again (Caps.Redeliver).
	Redeliver(t *testing.T, ev Event)
	// Acked reports whether the fake saw ev acknowledged (Caps.Acks).
	Acked(t *testing.T, ev Event) bool
	// React makes user name add emoji (👍 or 👎, in the platform's own
	// spelling) on the bot's message with the platform id messageID, as
	// Send returned it (Caps.Reactions).
	React(t *testing.T, from, messageID, emoji string)
	// Limit is the size every part must stay under, as the platform's
	// issue says it ("split under 4096 characters"), in the units of
	// textfmt.Len; 0 means no limit (one part per reply).
	Limit() int
}

// Store is the store the suite runs the gateway over; store.DB is one.
type Store interface {
	core.Store
	QueueCounts(ctx context.Context) (map[string]int, error)
}

// Options configure Run.
type Options struct {
	// OpenStore opens a fresh, empty store for one check.
	OpenStore func(t *testing.T) Store
}

// wait bounds every wait of the suite; a check that needs longer fails.
const wait = 20 * time.Second

// Run runs the conformance suite against p.
func Run(t *testing.T, p Platform, o Options) {
	t.Run("AckOnlyAfterCommit", func(t *testing.T) { ackOnlyAfterCommit(t, p, o) })
	t.Run("DuplicateMakesOneRow", func(t *testing.T) { duplicateMakesOneRow(t, p, o) })
	t.Run("ReactionJudgesTheRightReply", func(t *testing.T) { reactionJudgesReply(t, p, o) })
	t.Run("SentIDsMapBack", func(t *testing.T) { sentIDsMapBack(t, p, o) })
	t.Run("PartsWithinLimit", func(t *testing.T) { partsWithinLimit(t, p, o) })
	t.Run("AllowlistIgnoresOthers", func(t *testing.T) { allowlistIgnoresOthers(t, p, o) })
	t.Run("RunStopsAndCloseIsIdempotent", func(t *testing.T) { runStopsAndCloses(t, p) })
}

// rig is a running gateway around one instance.
type rig struct {
	inst    Instance
	store   Store
	ch      *recorder
	signals *signalLog
	gw      *gateway.Gateway
	sink    *gateSink
}

// longQuestion makes the echo agent answer with a text several parts long.
const longQuestion = "please answer at length"

// echo is the suite's agent: it answers "echo: <text>", or a long answer
// with code blocks to longQuestion.
type echo struct{ limit int }

func (a echo) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	text := "echo: " + t.Text
	if t.Text == longQuestion {
		text = longAnswer(a.limit)
	}
	return core.Answer{Text: text, Model: "fake/model", TaskType: "chat",
		Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// longAnswer is about three parts of Markdown with a code block crossing
// a part boundary and characters every platform escapes.
func longAnswer(limit int) string {
	if limit <= 0 {
		limit = 4096
	}
	var b strings.Builder
	for i := 0; b.Len() < 3*limit; i++ {
		fmt.Fprintf(&b, "Paragraph %d says **bold** things & <angles> with `code`.\n\n", i)
		if i%7 == 3 {
			b.WriteString("```go\n")
			for j := 0; j < 20; j++ {
				fmt.Fprintf(&b, "x%d := %d // <not a tag> & more\n", j, j)
			}
			b.WriteString("```\n\n")
		}
	}
	return b.String()
}

// recorder wraps the channel under test: it records the ids Send returns
// and puts the gate sink between the channel and the gateway.
type recorder struct {
	core.Channel
	gate *gateSink
	mu   sync.Mutex
	ids  []string
}

func (r *recorder) Run(ctx context.Context, sink core.Sink) error {
	r.gate.mu.Lock()
	r.gate.Sink = sink
	r.gate.mu.Unlock()
	return r.Channel.Run(ctx, r.gate)
}

func (r *recorder) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	id, err := r.Channel.Send(ctx, to, part)
	if err == nil {
		r.mu.Lock()
		r.ids = append(r.ids, id)
		r.mu.Unlock()
	}
	return id, err
}

func (r *recorder) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// Working passes the optional capability on.
func (r *recorder) Working(ctx context.Context, in core.Inbound) func() {
	if ind, ok := r.Channel.(core.Indicator); ok {
		return ind.Working(ctx, in)
	}
	return func() {}
}

type signalLog struct {
	mu  sync.Mutex
	got []core.Signal
}

func (s *signalLog) RecordSignal(_ context.Context, sig core.Signal) error {
	s.mu.Lock()
	s.got = append(s.got, sig)
	s.mu.Unlock()
	return nil
}

func (s *signalLog) all() []core.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Signal(nil), s.got...)
}

// gateSink stands between the channel and the gateway: it fails the first
// Accept of each message id failFirst says so, and counts the calls.
type gateSink struct {
	core.Sink
	mu        sync.Mutex
	calls     map[string]int
	failFirst bool
}

func (s *gateSink) Accept(ctx context.Context, in core.Inbound) error {
	s.mu.Lock()
	s.calls[in.MessageID]++
	n := s.calls[in.MessageID]
	fail := s.failFirst && n == 1
	next := s.Sink
	s.mu.Unlock()
	if fail {
		return &core.Error{Kind: core.KindUnavailable, Msg: "the database is busy (conformance suite)"}
	}
	return next.Accept(ctx, in)
}

func (s *gateSink) accepts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// start runs a gateway around a fresh instance until the test ends.
func start(t *testing.T, p Platform, o Options, allowUsers []string, failFirst bool) *rig {
	t.Helper()
	inst := p.Start(t, allowUsers)
	r := &rig{inst: inst, store: o.OpenStore(t), signals: &signalLog{}}
	r.sink = &gateSink{calls: map[string]int{}, failFirst: failFirst}
	r.ch = &recorder{Channel: inst.Channel(), gate: r.sink}
	r.gw = gateway.New(gateway.Options{Store: r.store, Agent: echo{limit: inst.Limit()}, Signals: r.signals, Workers: 4,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	r.gw.AddChannel(r.ch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.gw.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway: %v", err)
			}
		case <-time.After(wait):
			t.Errorf("the gateway did not stop within %s of its context ending", wait)
		}
		if err := r.ch.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// eventually polls cond until it holds or the suite's wait ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) rows(t *testing.T) int {
	t.Helper()
	counts, err := r.store.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func (r *rig) done(t *testing.T) int {
	t.Helper()
	counts, err := r.store.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return counts[core.StatusDone]
}

// waitSent waits until n parts were sent and returns their platform ids.
func (r *rig) waitSent(t *testing.T, n int) []string {
	t.Helper()
	eventually(t, fmt.Sprintf("%d sent parts", n), func() bool { return len(r.ch.sent()) >= n })
	return r.ch.sent()
}

func ackOnlyAfterCommit(t *testing.T, p Platform, o Options) {
	r := start(t, p, o, nil, true)
	if !r.inst.Caps().Acks {
		t.Skip("the platform has no acknowledgements to check")
	}
	ev := r.inst.Message(t, "alice", "hello")
	// The first Accept fails: the event must not be acknowledged, so the
	// platform delivers it again; the second Accept commits it.
	eventually(t, "the event delivered again after a failed commit", func() bool { return r.sink.accepts() >= 2 })
	eventually(t, "the reply", func() bool { return len(r.ch.sent()) >= 1 })
	eventually(t, "the acknowledgement after the commit", func() bool { return r.inst.Acked(t, ev) })
	if n := r.rows(t); n != 1 {
		t.Fatalf("queue rows = %d, want 1", n)
	}
}

func duplicateMakesOneRow(t *testing.T, p Platform, o Options) {
	r := start(t, p, o, nil, false)
	if !r.inst.Caps().Redeliver {
		t.Skip("the fake cannot deliver an event twice")
	}
	ev := r.inst.Message(t, "alice", "only once")
	r.inst.Redeliver(t, ev)
	r.waitSent(t, 1)
	eventually(t, "both deliveries handed over", func() bool { return r.sink.accepts() >= 2 })
	// A later message shows the channel got past both deliveries.
	r.inst.Message(t, "alice", "next")
	r.waitSent(t, 2)
	eventually(t, "both requests done", func() bool { return r.done(t) == 2 })
	if n := r.rows(t); n != 2 {
		t.Fatalf("queue rows = %d, want 2 (the duplicate must not make a row)", n)
	}
	if n := len(r.ch.sent()); n != 2 {
		t.Fatalf("sent %d replies, want 2", n)
	}
}

func reactionJudgesReply(t *testing.T, p Platform, o Options) {
	r := start(t, p, o, nil, false)
	if !r.inst.Caps().Reactions {
		t.Skip("the fake cannot deliver reactions")
	}
	r.inst.Message(t, "alice", "first")
	first := r.waitSent(t, 1)[0]
	r.inst.Message(t, "alice", "second")
	second := r.waitSent(t, 2)[1]
	r.inst.React(t, "alice", first, "👎")
	eventually(t, "the signal of the reaction", func() bool { return len(r.signals.all()) >= 1 })
	want, err := r.store.ReplyByPlatformID(context.Background(), r.ch.Name(), first)
	if err != nil || want == nil {
		t.Fatalf("reply of %s: %v, %v", first, want, err)
	}
	sig := r.signals.all()[0]
	if sig.Polarity != core.Negative || sig.ReplyID != want.ID || sig.Kind != core.SignalReaction {
		t.Fatalf("signal = %+v, want a negative reaction on reply %d (%q)", sig, want.ID, want.Text)
	}
	r.inst.React(t, "alice", second, "👍")
	eventually(t, "the second signal", func() bool { return len(r.signals.all()) >= 2 })
	if sig := r.signals.all()[1]; sig.Polarity != core.Positive || sig.ReplyID == want.ID {
		t.Fatalf("second signal = %+v, want positive on the other reply", sig)
	}
}

func sentIDsMapBack(t *testing.T, p Platform, o Options) {
	r := start(t, p, o, nil, false)
	r.inst.Message(t, "alice", "map me")
	r.inst.Message(t, "alice", longQuestion)
	eventually(t, "both requests done", func() bool { return r.done(t) == 2 })
	ids := r.ch.sent()
	want := 2 // a short reply and a long one
	if r.inst.Limit() > 0 {
		want = 3 // the long one in several parts
	}
	if len(ids) < want {
		t.Fatalf("sent %d parts, want at least %d", len(ids), want)
	}
	seen := map[string]bool{}
	replies := map[int64]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Fatalf("Send returned id %q twice or empty: %v", id, ids)
		}
		seen[id] = true
		rep, err := r.store.ReplyByPlatformID(context.Background(), r.ch.Name(), id)
		if err != nil || rep == nil {
			t.Fatalf("id %q maps to no reply (%v)", id, err)
		}
		replies[rep.ID] = true
	}
	if len(replies) != 2 {
		t.Fatalf("the ids map to %d replies, want 2", len(replies))
	}
}

func partsWithinLimit(t *testing.T, p Platform, o Options) {
	r := start(t, p, o, nil, false)
	limit := r.inst.Limit()
	if limit <= 0 {
		if parts := r.ch.Format(longAnswer(4096)); len(parts) != 1 {
			t.Fatalf("a channel without a limit split a reply into %d parts", len(parts))
		}
		return
	}
	// A text with no break point in it, in a code block and out of one,
	// fills parts to the limit: they stay under it too.
	unbroken := strings.Repeat("y", 3*limit)
	for _, text := range []string{unbroken, "```\n" + unbroken + "\n```"} {
		for i, part := range r.ch.Format(text) {
			if n := textfmt.Len(part); n >= limit {
				t.Fatalf("a text with no break point: part %d has length %d, want under %d", i, n, limit)
			}
		}
	}
	parts := r.ch.Format(longAnswer(limit))
	if len(parts) < 2 {
		t.Fatalf("a text of three times the limit gave %d part(s)", len(parts))
	}
	for i, part := range parts {
		if n := textfmt.Len(part); n >= limit || strings.TrimSpace(part) == "" {
			t.Fatalf("part %d has length %d (want under %d) or is blank", i, n, limit)
		}
	}
	// The fake accepts every part as the platform would.
	r.inst.Message(t, "alice", longQuestion)
	eventually(t, "the long reply sent", func() bool { return r.done(t) == 1 })
	if n := len(r.ch.sent()); n != len(parts) {
		t.Fatalf("sent %d parts, want %d", n, len(parts))
	}
}

func allowlistIgnoresOthers(t *testing.T, p Platform, o Options) {
	probe := p.Start(t, nil)
	if !probe.Caps().Users {
		t.Skip("the platform has one user only")
	}
	r := start(t, p, o, []string{probe.UserID("alice")}, false)
	ev := r.inst.Message(t, "bob", "let me in")
	r.inst.Message(t, "alice", "hello")
	r.waitSent(t, 1)
	if r.inst.Caps().Acks {
		eventually(t, "the ignored event acknowledged", func() bool { return r.inst.Acked(t, ev) })
	}
	if n := r.rows(t); n != 1 {
		t.Fatalf("queue rows = %d, want 1: bob is not in allow_users", n)
	}
}

func runStopsAndCloses(t *testing.T, p Platform) {
	inst := p.Start(t, nil)
	ch := inst.Channel()
	ctx, cancel := context.WithCancel(context.Background())
	g := gateway.New(gateway.Options{}) // a sink that accepts nothing: Run must not need it to stop
	done := make(chan error, 1)
	go func() { done <- ch.Run(ctx, g) }()
	time.Sleep(50 * time.Millisecond) // let it connect
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after its context ended = %v, want nil", err)
		}
	case <-time.After(wait):
		t.Fatalf("Run did not return within %s of its context ending", wait)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("first Close: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
