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

// outChannel records where each part went.
type outChannel struct {
	mu   sync.Mutex
	sent []sentPart
	got  chan sentPart
}

type sentPart struct {
	to   core.Outbound
	text string
}

func newOutChannel() *outChannel { return &outChannel{got: make(chan sentPart, 100)} }

func (c *outChannel) Name() string                               { return "fake" }
func (c *outChannel) Run(ctx context.Context, _ core.Sink) error { <-ctx.Done(); return nil }
func (c *outChannel) Format(text string) []string                { return []string{text} }
func (c *outChannel) Close() error                               { return nil }
func (c *outChannel) Send(_ context.Context, to core.Outbound, part string) (string, error) {
	c.mu.Lock()
	c.sent = append(c.sent, sentPart{to, part})
	c.mu.Unlock()
	c.got <- sentPart{to, part}
	return "id-" + part, nil
}

func (c *outChannel) next(t *testing.T) sentPart {
	t.Helper()
	select {
	case p := <-c.got:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("nothing sent")
	}
	return sentPart{}
}

func (c *outChannel) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case p := <-c.got:
		t.Fatalf("sent %q; want nothing", p.text)
	case <-time.After(d):
	}
}

// firingRunner answers firings by rule: a plugin action posts text, a
// "skip" prompt is skipped, other prompts are rewritten.
type firingRunner struct{}

func (firingRunner) RunFiring(_ context.Context, f core.Firing) (core.FiringResult, error) {
	switch {
	case f.Action != "":
		return core.FiringResult{Text: "ran " + f.Plugin + "." + f.Action + " " + f.Args["x"]}, nil
	case f.Prompt == "skip":
		return core.FiringResult{Skip: true, Reason: "nothing new"}, nil
	case f.Prompt == "fail":
		return core.FiringResult{}, &core.Error{Kind: core.KindInvalid, Msg: "plugin is down"}
	}
	return core.FiringResult{Prompt: "[scheduled] " + f.Prompt}, nil
}

type events struct {
	mu  sync.Mutex
	got []core.OpsEvent
}

func (e *events) Emit(ev core.OpsEvent) { e.mu.Lock(); e.got = append(e.got, ev); e.mu.Unlock() }

func (e *events) all() []core.OpsEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]core.OpsEvent(nil), e.got...)
}

type firingRig struct {
	db *store.DB
	g  *gateway.Gateway
	ch *outChannel
	ag *fakeAgent
	ev *events
}

func newFiringRig(t *testing.T, o gateway.Options) *firingRig {
	t.Helper()
	db := openDB(t, store.Options{})
	ag := &fakeAgent{}
	ev := &events{}
	o.Store, o.Agent, o.Events = db, ag, ev
	if o.Pairings == nil {
		o.Pairings = db
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 1
	}
	g := gateway.New(o)
	ch := newOutChannel()
	g.AddChannel(ch)
	serve(t, g)
	return &firingRig{db: db, g: g, ch: ch, ag: ag, ev: ev}
}

func TestFiringIsAnsweredOnceInItsConversation(t *testing.T) {
	h := &tagHooks{}
	r := newFiringRig(t, gateway.Options{Firings: firingRunner{}, Hooks: h})
	conv := core.ConversationKey{Channel: "fake", Chat: "ops", Thread: "t1"}
	at := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	f := core.Firing{ScheduleID: 7, At: at, Conversation: conv, Prompt: "summarize the colour of incidents", Creator: "alice"}
	for i := range 2 {
		dup, err := r.g.EnqueueFiring(context.Background(), f)
		if err != nil || dup != (i == 1) {
			t.Fatalf("enqueue %d: dup %v err %v; want the second one a duplicate", i, dup, err)
		}
	}
	p := r.ch.next(t)
	if p.to.Conversation != conv || p.to.ReplyTo != "" {
		t.Fatalf("posted to %+v (reply to %q); want %v and no reply-to", p.to.Conversation, p.to.ReplyTo, conv)
	}
	if p.text != "answer to [scheduled] summarize the color of incidents [checked]" {
		t.Fatalf("posted %q; want the runner's prompt through the pre-hooks, the agent and the post-hooks", p.text)
	}
	r.ch.none(t, 200*time.Millisecond)
	if len(h.pre) != 1 || h.pre[0].In.Origin != core.OriginSchedule || h.pre[0].In.UserID != "alice" {
		t.Fatalf("hooks saw %+v; want one turn from the schedule's creator", h.pre)
	}
}

func TestFiringTextSkipAndFailure(t *testing.T) {
	r := newFiringRig(t, gateway.Options{Firings: firingRunner{}})
	conv := core.ConversationKey{Channel: "fake", Chat: "ops"}
	at := time.Now()
	ctx := context.Background()
	if _, err := r.g.EnqueueFiring(ctx, core.Firing{ScheduleID: 1, At: at, Conversation: conv, Plugin: "calc", Action: "evaluate", Args: map[string]string{"x": "6*7"}}); err != nil {
		t.Fatal(err)
	}
	if p := r.ch.next(t); p.text != "ran calc.evaluate 6*7" {
		t.Fatalf("posted %q; want the plugin action's text", p.text)
	}
	if _, err := r.g.EnqueueFiring(ctx, core.Firing{ScheduleID: 2, At: at, Conversation: conv, Prompt: "skip"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.g.EnqueueFiring(ctx, core.Firing{ScheduleID: 3, At: at, Conversation: conv, Prompt: "fail"}); err != nil {
		t.Fatal(err)
	}
	r.ch.none(t, 300*time.Millisecond)
	if n := r.agentCalls(); n != 0 {
		t.Fatalf("agent called %d times; want none", n)
	}
	var failed *core.OpsEvent
	for _, e := range r.ev.all() {
		if e.Kind == core.EventRequestFailed {
			failed = &e
		}
	}
	if failed == nil || failed.Subject != "fake" || !strings.Contains(failed.Message, "schedule #3") {
		t.Fatalf("events %+v; want request_failed for schedule #3", r.ev.all())
	}
	if _, err := r.g.EnqueueFiring(ctx, core.Firing{ScheduleID: 4, At: at, Conversation: core.ConversationKey{Channel: "slack", Chat: "x"}, Prompt: "p"}); core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "channels.slack") {
		t.Fatalf("firing to a disabled channel: %v; want an error naming channels.slack", err)
	}
}

// TestFiringForAnotherReplicasChannelIsQueued: with the queue shared by
// replicas whose configs differ, the scheduler's leader may not run the
// schedule's channel; its firing is queued for a replica that does (the
// claims keep to their channels), not refused.
func TestFiringForAnotherReplicasChannelIsQueued(t *testing.T) {
	r := newFiringRig(t, gateway.Options{SharedQueue: true})
	waitAccepting(t, r.g)
	at := time.Now().Truncate(time.Minute)
	dup, err := r.g.EnqueueFiring(context.Background(), core.Firing{ScheduleID: 9, At: at, Conversation: core.ConversationKey{Channel: "slack", Chat: "x"}, Prompt: "p"})
	if err != nil || dup {
		t.Fatalf("firing for a channel another replica runs: dup %v, %v; want it queued", dup, err)
	}
	// After waitAccepting's probe.
	queued := false
	for id := int64(1); id <= 3 && !queued; id++ {
		it, _, err := r.db.QueueItem(context.Background(), id)
		queued = err == nil && it.Firing != nil && it.Firing.ScheduleID == 9
	}
	if !queued {
		t.Fatal("the firing of schedule 9 is not in the queue")
	}
}

func TestInjectedMessageIsAnsweredWithoutReplyAndNeverAdmin(t *testing.T) {
	r := newFiringRig(t, gateway.Options{Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessAllowlist, Admins: []string{"boss"}, Users: []string{"boss"}}}})
	r.g.AddCommand(core.Command{CommandInfo: core.CommandInfo{Name: "wipe"}, Admin: true, Run: func(context.Context, core.CommandRequest) (string, error) { return "wiped", nil }})
	waitAccepting(t, r.g)
	ctx := context.Background()
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "C1"}, MessageID: "gh-1", UserID: "github", Text: "PR #1 opened", Origin: core.OriginPlugin + "github"}
	for i := range 2 {
		dup, err := r.g.Inject(ctx, in)
		if err != nil || dup != (i == 1) {
			t.Fatalf("inject %d: dup %v err %v", i, dup, err)
		}
	}
	p := r.ch.next(t)
	if p.text != "answer to PR #1 opened" || p.to.ReplyTo != "" || p.to.Conversation.Chat != "C1" {
		t.Fatalf("sent %+v; want the answer in C1 without a reply-to", p)
	}
	r.ch.none(t, 200*time.Millisecond)
	// Claiming to be the admin does not make an injected message one.
	if _, err := r.g.Inject(ctx, core.Inbound{Conversation: in.Conversation, UserID: "boss", Text: "/wipe", Origin: in.Origin}); err != nil {
		t.Fatal(err)
	}
	if p := r.ch.next(t); p.text == "wiped" {
		t.Fatal("an injected /wipe ran an admin command")
	}
	for _, bad := range []core.Inbound{
		{Conversation: core.ConversationKey{Channel: "nope", Chat: "x"}, Text: "t", Origin: "plugin:x"},
		{Conversation: core.ConversationKey{Channel: "fake"}, Text: "t", Origin: "plugin:x"},
		{Conversation: core.ConversationKey{Channel: "fake", Chat: "x"}, Text: " ", Origin: "plugin:x"},
		{Conversation: core.ConversationKey{Channel: "fake", Chat: "x"}, Text: "t"},
	} {
		if _, err := r.g.Inject(ctx, bad); core.ErrorKind(err) != core.KindInvalid {
			t.Errorf("inject %+v: %v; want an invalid-input error", bad, err)
		}
	}
}

// authorizer answers by user id; "flaky" fails.
type authorizer struct {
	mu    sync.Mutex
	asked []string
}

func (a *authorizer) Authorize(_ context.Context, channel, chat, user string) (core.AuthDecision, error) {
	a.mu.Lock()
	a.asked = append(a.asked, channel+"/"+chat+"/"+user)
	a.mu.Unlock()
	switch user {
	case "alice":
		return core.AuthAllow, nil
	case "root":
		return core.AuthAdmin, nil
	case "flaky":
		return core.AuthAllow, errors.New("directory unreachable")
	}
	return core.AuthDeny, nil
}

func TestAuthorizerDecidesAfterTheChannelRule(t *testing.T) {
	az := &authorizer{}
	r := newFiringRig(t, gateway.Options{Authorizer: az, Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessOpen, Admins: []string{"cfgadmin"}}}})
	r.g.AddCommand(core.Command{CommandInfo: core.CommandInfo{Name: "wipe"}, Admin: true, Run: func(context.Context, core.CommandRequest) (string, error) { return "wiped", nil }})
	waitAccepting(t, r.g)
	send := func(user, text string) {
		t.Helper()
		in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: user + text, UserID: user, Text: text}
		if err := r.g.Accept(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	send("mallory", "hi")
	send("flaky", "hi")
	r.ch.none(t, 300*time.Millisecond)
	send("alice", "hi")
	if p := r.ch.next(t); p.text != "answer to hi" {
		t.Fatalf("alice got %q", p.text)
	}
	send("alice", "/wipe")
	if p := r.ch.next(t); p.text == "wiped" {
		t.Fatal("an allowed user ran an admin command")
	}
	send("root", "/wipe")
	if p := r.ch.next(t); p.text != "wiped" {
		t.Fatalf("the auth provider's admin got %q; want the admin command to run", p.text)
	}
	before := az.count()
	send("cfgadmin", "/wipe")
	if p := r.ch.next(t); p.text != "wiped" || az.count() != before {
		t.Fatalf("config admin got %q, provider asked %d times more; want the command and no question", p.text, az.count()-before)
	}
	if n := r.agentCalls(); n != 1 {
		t.Fatalf("agent calls = %d; want only alice's message", n)
	}
}

func waitAccepting(t *testing.T, g *gateway.Gateway) {
	t.Helper()
	for range 1000 {
		err := g.Accept(context.Background(), core.Inbound{Conversation: core.ConversationKey{Channel: "probe", Chat: "p"}, MessageID: "probe", Text: "x"})
		if !errors.Is(err, gateway.ErrNotAccepting) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("gateway never accepted")
}

func (r *firingRig) agentCalls() int {
	r.ag.mu.Lock()
	defer r.ag.mu.Unlock()
	return r.ag.calls
}

func (a *authorizer) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked)
}

// Issue 25 (lower): a chat schedule fires only while its creator may talk
// to the bot on its channel: taken off the allowlist, or with a pairing
// denied, their schedules stop.
func TestChatScheduleStopsWhenItsCreatorLostAccess(t *testing.T) {
	r := newFiringRig(t, gateway.Options{Firings: firingRunner{}, Access: map[string]core.AccessPolicy{
		"fake": {Mode: core.AccessAllowlist, Users: []string{"ALICE"}, Admins: []string{"ADMIN"}},
	}})
	conv := core.ConversationKey{Channel: "fake", Chat: "ops"}
	ctx := context.Background()
	at := time.Now()
	for i, creator := range []string{"ALICE", "BOB", "ADMIN"} {
		if _, err := r.g.EnqueueFiring(ctx, core.Firing{ScheduleID: int64(i + 1), At: at, Source: core.ScheduleChat, Conversation: conv, Prompt: "report of " + creator, Creator: creator}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{r.ch.next(t).text: true, r.ch.next(t).text: true}
	r.ch.none(t, 300*time.Millisecond)
	if !got["answer to [scheduled] report of ALICE"] || !got["answer to [scheduled] report of ADMIN"] {
		t.Fatalf("posted %v; want alice's and the admin's, not bob's (not on the allowlist)", got)
	}
}

func TestChatScheduleStopsWhenItsCreatorsPairingIsDenied(t *testing.T) {
	r := newFiringRig(t, gateway.Options{Firings: firingRunner{}, Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing}}})
	conv := core.ConversationKey{Channel: "fake", Chat: "dm"}
	ctx := context.Background()
	for _, u := range []string{"carol", "dave"} {
		p, err := r.db.RequestPairing(ctx, core.Pairing{Channel: "fake", UserID: u, Conversation: conv, Code: core.NewPairingCode(), Status: core.PairingPending, RequestedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.db.DecidePairing(ctx, "fake", p.Code, u == "carol", "cli"); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range []string{"carol", "dave"} {
		if _, err := r.g.EnqueueFiring(ctx, core.Firing{ScheduleID: int64(i + 1), At: time.Now(), Source: core.ScheduleChat, Conversation: conv, Prompt: "for " + u, Creator: u}); err != nil {
			t.Fatal(err)
		}
	}
	if p := r.ch.next(t); p.text != "answer to [scheduled] for carol" {
		t.Fatalf("posted %q; want carol's (approved)", p.text)
	}
	r.ch.none(t, 300*time.Millisecond)
}
