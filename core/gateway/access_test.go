package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// acceptFrom hands the gateway a message of user in chat.
func (r *rig) acceptFrom(user, chat, id, text string) {
	r.t.Helper()
	r.acceptIn(core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: chat}, MessageID: id, UserID: user, UserName: "name-" + user, Text: text, Private: true})
}

// acceptIn hands the gateway in, waiting for it to accept messages.
func (r *rig) acceptIn(in core.Inbound) {
	r.t.Helper()
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

// nothingSent fails when the channel sends anything within d.
func (r *rig) nothingSent(d time.Duration) {
	r.t.Helper()
	select {
	case got := <-r.ch.notify:
		r.t.Fatalf("sent %q; want nothing", got)
	case <-time.After(d):
	}
}

func (r *rig) next() string {
	r.t.Helper()
	select {
	case got := <-r.ch.notify:
		return got
	case <-time.After(10 * time.Second):
		r.t.Fatal("nothing sent")
	}
	return ""
}

var codeRE = regexp.MustCompile(`pairing code is ([A-Z0-9]{8})`)

func TestPairingKeepsStrangersFromTheAgent(t *testing.T) {
	db := openDB(t, store.Options{})
	ag := &fakeAgent{}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, Pairings: db,
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}, Users: []string{"friend"}}}})

	// An unknown user gets a code; nothing is queued, nothing reaches the agent.
	r.acceptFrom("stranger", "s", "1", "hello?")
	m := codeRE.FindStringSubmatch(r.next())
	if m == nil {
		t.Fatal("the stranger got no pairing code")
	}
	code := m[1]
	r.acceptFrom("stranger", "s", "2", "/help")
	r.nothingSent(150 * time.Millisecond) // one notice a minute
	if counts, _ := db.QueueCounts(context.Background()); len(counts) != 0 || ag.calls != 0 {
		t.Fatalf("queue %v, agent calls %d; a stranger's message must not be queued", counts, ag.calls)
	}

	// A user listed from the start and the admin are answered.
	r.acceptFrom("friend", "f", "3", "hi")
	r.expect("answer to hi")

	// Only the admin may approve.
	r.acceptFrom("friend", "f", "4", "/pair approve "+code)
	if got := r.next(); got != "Only an admin of this fake bot can use /pair." {
		t.Fatalf("non-admin /pair answered %q", got)
	}
	r.acceptFrom("admin", "a", "5", "/pair")
	if got := r.next(); !strings.Contains(got, code) || !strings.Contains(got, "name-stranger") {
		t.Fatalf("/pair listed %q; want the stranger's code", got)
	}
	r.acceptFrom("admin", "a", "6", "/pair approve "+strings.ToLower(code[:4])+"-"+code[4:])
	got := []string{r.next(), r.next()}
	if !strings.Contains(strings.Join(got, "\n"), "Approved name-stranger") || !strings.Contains(strings.Join(got, "\n"), "An admin approved you") {
		t.Fatalf("approval sent %q; want the admin's confirmation and the user's notice", got)
	}

	r.acceptFrom("stranger", "s", "7", "now?")
	r.expect("answer to now?")
	if ag.calls != 2 {
		t.Fatalf("agent calls = %d; want the friend's and the approved user's", ag.calls)
	}
}

func TestDeniedAndAllowlistedOutUsersAreIgnored(t *testing.T) {
	db := openDB(t, store.Options{})
	ag := &fakeAgent{}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, Pairings: db,
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	r.acceptFrom("pest", "p", "1", "hi")
	code := codeRE.FindStringSubmatch(r.next())[1]
	r.acceptFrom("admin", "a", "2", "/pair deny "+code)
	if got := r.next(); !strings.HasPrefix(got, "Denied name-pest") {
		t.Fatalf("deny answered %q", got)
	}
	r.acceptFrom("pest", "p", "3", "please")
	r.nothingSent(150 * time.Millisecond)

	db2 := openDB(t, store.Options{})
	r2 := runOn(t, db2, gateway.Options{Store: db2, Agent: ag,
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessAllowlist, Admins: []string{"admin"}}}})
	r2.acceptFrom("someone", "x", "1", "hi")
	r2.nothingSent(150 * time.Millisecond)
	r2.acceptFrom("admin", "a", "2", "hi")
	r2.expect("answer to hi")
}

func TestAdminOnlyCommandRefusedInOneSentence(t *testing.T) {
	db := openDB(t, store.Options{})
	ran := false
	r := runOn(t, db, gateway.Options{Store: db, Agent: &fakeAgent{},
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessOpen, Admins: []string{"boss"}}}})
	r.g.AddCommand(core.Command{CommandInfo: core.CommandInfo{Name: "budget"}, Admin: true,
		Run: func(context.Context, core.CommandRequest) (string, error) { ran = true; return "budget set", nil }})
	r.acceptFrom("u1", "c", "1", "/budget 5")
	if got := r.next(); got != "Only an admin of this fake bot can use /budget." {
		t.Fatalf("refusal = %q", got)
	}
	r.acceptFrom("boss", "c2", "2", "/budget 5")
	r.expect("budget set")
	if !ran {
		t.Fatal("the admin's command did not run")
	}
}

// adminAgent answers whether its turn said the sender is an admin.
type adminAgent struct{}

func (adminAgent) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	text := fmt.Sprintf("admin %v", t.Admin)
	return core.Answer{Text: text, Model: "fake/m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// The agent is told, as a command is, whether the sender is an admin of
// the channel (an admin may share a memory with every user).
func TestTurnSaysWhetherTheSenderIsAnAdmin(t *testing.T) {
	db := openDB(t, store.Options{})
	r := runOn(t, db, gateway.Options{Store: db, Agent: adminAgent{},
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessOpen, Admins: []string{"boss"}}}})
	r.acceptFrom("u1", "c", "1", "hi")
	r.expect("admin false")
	r.acceptFrom("boss", "c2", "2", "hi")
	r.expect("admin true")
}

// countingObserver records what the gateway tells its Observer.
type countingObserver struct {
	mu       sync.Mutex
	accepted map[string]int
	stages   map[core.Stage]int
	outcomes map[core.Outcome]int
	hooks    int
}

func (o *countingObserver) Accepted(ch string) { o.mu.Lock(); o.accepted[ch]++; o.mu.Unlock() }
func (o *countingObserver) Stage(_ string, s core.Stage, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d >= 0 {
		o.stages[s]++
	}
}
func (o *countingObserver) Finished(_ string, _ core.EventKind, out core.Outcome) {
	o.mu.Lock()
	o.outcomes[out]++
	o.mu.Unlock()
}
func (o *countingObserver) HookFailed(string, core.Stage) { o.mu.Lock(); o.hooks++; o.mu.Unlock() }

func TestObserverSeesEachStage(t *testing.T) {
	db := openDB(t, store.Options{})
	obs := &countingObserver{accepted: map[string]int{}, stages: map[core.Stage]int{}, outcomes: map[core.Outcome]int{}}
	r := runOn(t, db, gateway.Options{Store: db, Agent: &fakeAgent{fail: 1, kind: core.KindUnavailable}, Hooks: &tagHooks{},
		Observer: obs, Backoff: func(int) time.Duration { return time.Millisecond }})
	r.accept("1", "q")
	r.next()
	r.accept("1", "q") // a duplicate is not accepted twice
	deadline := time.Now().Add(5 * time.Second)
	for {
		obs.mu.Lock()
		done := obs.outcomes[core.OutcomeAnswered] == 1
		obs.mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.accepted["fake"] != 1 {
		t.Errorf("accepted = %v; want 1 for fake", obs.accepted)
	}
	if obs.outcomes[core.OutcomeRetried] != 1 || obs.outcomes[core.OutcomeAnswered] != 1 {
		t.Errorf("outcomes = %v; want one retry, then answered", obs.outcomes)
	}
	for s, want := range map[core.Stage]int{core.StageQueue: 1, core.StagePreHooks: 2, core.StageAgent: 2, core.StagePostHooks: 1, core.StageDelivery: 1} {
		if obs.stages[s] != want {
			t.Errorf("stage %s observed %d times, want %d (all: %v)", s, obs.stages[s], want, obs.stages)
		}
	}
}

// Issue 25 (lower): a pairing code expires after PairingTTL (approving it
// then is refused, and its user gets a new code when they write again),
// and at most MaxPendingPairings requests wait on a channel: past that an
// unknown user gets no code and adds no row.
func TestPairingCodesExpireAndAreCapped(t *testing.T) {
	r := newClockRig(t, &fakeAgent{}, gateway.Options{
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	ctx := context.Background()
	r.acceptFrom("stranger", "s", "1", "hello?")
	old := codeRE.FindStringSubmatch(r.next())[1]

	r.clock.Advance(core.PairingTTL + time.Minute)
	r.acceptFrom("admin", "a", "2", "/pair approve "+old)
	if got := r.next(); !strings.Contains(got, "expired") {
		t.Fatalf("approving an expired code answered %q", got)
	}
	r.acceptFrom("stranger", "s", "3", "still there?")
	fresh := codeRE.FindStringSubmatch(r.next())
	if fresh == nil || fresh[1] == old {
		t.Fatalf("the stranger got %v after the code expired; want a new code", fresh)
	}
	recs, _ := r.db.Pairings(ctx, "fake")
	if len(recs) != 1 || recs[0].Code != fresh[1] {
		t.Fatalf("pairings = %+v; want the one fresh request", recs)
	}

	// The cap: MaxPendingPairings waiting, then nobody new gets a code.
	for i := 1; i < core.MaxPendingPairings; i++ {
		if _, err := r.db.RequestPairing(ctx, core.Pairing{Channel: "fake", UserID: "u" + strconv.Itoa(i), Code: core.NewPairingCode(), RequestedAt: r.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	r.acceptFrom("one-too-many", "x", "4", "me too")
	r.nothingSent(200 * time.Millisecond)
	if p, _ := r.db.Pairing(ctx, "fake", "one-too-many"); p != nil {
		t.Fatalf("a request past the cap was recorded: %+v", p)
	}
	// Once they expire, there is room again.
	r.clock.Advance(core.PairingTTL + time.Minute)
	r.acceptFrom("one-too-many", "x", "5", "me too")
	if codeRE.FindStringSubmatch(r.next()) == nil {
		t.Fatal("no code once the old requests expired")
	}
}

// An admin hears of a pairing request from the operator's notification
// sinks (a chat sink in their own DM), with the code and how to approve
// it, once per request: a stranger writing again is not told twice.
func TestPairingRequestIsToldToTheOperator(t *testing.T) {
	db := openDB(t, store.Options{})
	ev := &events{}
	r := runOn(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Pairings: db, Events: ev,
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	r.acceptFrom("stranger", "s", "1", "hello?")
	code := codeRE.FindStringSubmatch(r.next())[1]
	r.acceptFrom("stranger", "s", "2", "anyone?")
	r.acceptFrom("friend", "f", "3", "me too")
	code2 := codeRE.FindStringSubmatch(r.next())[1]

	var got []core.OpsEvent
	for _, e := range ev.all() {
		if e.Kind == core.EventPairingRequested {
			got = append(got, e)
		}
	}
	if len(got) != 2 {
		t.Fatalf("pairing events %+v; want one per request", got)
	}
	for i, c := range []string{code, code2} {
		e := got[i]
		if e.Subject != "fake "+c || !strings.Contains(e.Message, "/pair approve "+c) || !strings.Contains(e.Message, "opentalon pair approve "+c) ||
			!strings.Contains(e.Message, "24 hours") || e.Details["user"] == "" {
			t.Fatalf("event %+v; want the code %s, how to approve it and its expiry", e, c)
		}
	}
	if !strings.Contains(got[0].Message, "`name-stranger` (user stranger)") {
		t.Fatalf("event message %q; want who asks", got[0].Message)
	}
}

// A stranger's name is theirs to choose: in the operator's notification
// (markdown a chat sink renders) it shows as written, never as a link or
// markup of the stranger's making.
func TestPairingEventShowsTheNameAsWritten(t *testing.T) {
	db := openDB(t, store.Options{})
	ev := &events{}
	r := runOn(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Pairings: db, Events: ev,
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	r.acceptIn(core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "s"}, MessageID: "1", UserID: "stranger",
		UserName: "[approve here](https://evil.example/) **now** `x`", Text: "hi", Private: true})
	r.next()
	for _, e := range ev.all() {
		if e.Kind != core.EventPairingRequested {
			continue
		}
		html, mrkdwn := textfmt.ToTelegramHTML(e.Message), textfmt.ToSlackMrkdwn(e.Message)
		if strings.Contains(html, "<a ") || strings.Contains(html, "<b>") || strings.Contains(mrkdwn, "<https://evil") || !strings.Contains(html, "evil.example") {
			t.Fatalf("the event %q renders as %q (Telegram) and %q (Slack); want the name as written", e.Message, html, mrkdwn)
		}
		return
	}
	t.Fatalf("events %+v; want a pairing_requested", ev.all())
}

// A stranger waiting for approval is told their code, how long it holds
// and that nothing is answered meanwhile; the messages they write next
// do not each bring the notice again (once an hour), but a new code is
// told at once.
func TestPairingNoticeIsNotRepeatedForEveryMessage(t *testing.T) {
	r := newClockRig(t, &fakeAgent{}, gateway.Options{
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	r.acceptFrom("stranger", "s", "1", "hello?")
	first := r.next()
	code := codeRE.FindStringSubmatch(first)[1]
	if !strings.Contains(first, "valid for 24 hours") || !strings.Contains(first, "/pair approve "+code) {
		t.Fatalf("the stranger was told %q; want the code, how to get it approved and how long it holds", first)
	}
	for i, wait := range []time.Duration{2 * time.Minute, 10 * time.Minute, 30 * time.Minute} {
		r.clock.Advance(wait)
		r.acceptFrom("stranger", "s", strconv.Itoa(i+2), "anyone?")
		r.nothingSent(100 * time.Millisecond)
	}
	// Told in one chat, they are told at once in another they write in
	// (a group's notice is no answer in their DM).
	r.acceptFrom("stranger", "dm", "8", "hello here")
	if other := codeRE.FindStringSubmatch(r.next()); other == nil || other[1] != code {
		t.Fatalf("in another chat the stranger was told %v; want the code %s at once", other, code)
	}
	r.clock.Advance(20 * time.Minute) // an hour after the first notice
	r.acceptFrom("stranger", "s", "9", "still waiting")
	reminder := r.next()
	if again := codeRE.FindStringSubmatch(reminder); again == nil || again[1] != code {
		t.Fatalf("the reminder after an hour has %v; want the same code %s", again, code)
	}
	if !strings.Contains(reminder, "valid for 23 hours") {
		t.Fatalf("the reminder after an hour says %q; want the 23 hours the code still holds", reminder)
	}
	r.clock.Advance(core.PairingTTL)
	r.acceptFrom("stranger", "s", "10", "hello again")
	if fresh := codeRE.FindStringSubmatch(r.next()); fresh == nil || fresh[1] == code {
		t.Fatalf("after the code expired the stranger got %v; want a new code at once", fresh)
	}
}

// An admin in chat can revoke an approved user: /pair approved lists the
// approved with their codes, and /pair deny CODE stops the bot answering
// them.
func TestPairListsTheApprovedForRevoking(t *testing.T) {
	db := openDB(t, store.Options{})
	ag := &fakeAgent{}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, Pairings: db,
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	r.acceptFrom("guest", "g", "1", "hi")
	code := codeRE.FindStringSubmatch(r.next())[1]
	r.acceptFrom("admin", "a", "2", "/pair approve "+code)
	r.next()
	r.next()
	r.acceptFrom("guest", "g", "3", "hello")
	r.expect("answer to hello")

	// /pair answers as issue 17 has it; /pair approved lists the approved.
	r.acceptFrom("admin", "a", "4", "/pair")
	if got := r.next(); got != "No pairing requests are waiting on fake." {
		t.Fatalf("/pair answered %q; want only that no request waits", got)
	}
	r.acceptFrom("admin", "a", "4b", "/pair approved")
	got := r.next()
	if !strings.Contains(got, "/pair deny CODE") || !strings.Contains(got, code+" — name-guest (user guest), approved") {
		t.Fatalf("/pair approved answered %q; want the approved guest with their code and how to revoke", got)
	}
	r.acceptFrom("admin", "a", "5", "/pair deny "+code)
	if got := r.next(); !strings.HasPrefix(got, "Denied name-guest") {
		t.Fatalf("revoking answered %q", got)
	}
	r.acceptFrom("guest", "g", "6", "still there?")
	r.nothingSent(150 * time.Millisecond)
	if ag.calls != 1 {
		t.Fatalf("agent calls = %d; a revoked user must not reach it", ag.calls)
	}
}

// The requests of strangers who never came back do not stay in the
// table: the next stranger's request clears the expired ones, so a flood
// of strangers leaves at most MaxPendingPairings rows a day.
func TestExpiredPairingRequestsAreClearedByTheNext(t *testing.T) {
	r := newClockRig(t, &fakeAgent{}, gateway.Options{
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Admins: []string{"admin"}}}})
	ctx := context.Background()
	for i := range core.MaxPendingPairings {
		if _, err := r.db.RequestPairing(ctx, core.Pairing{Channel: "fake", UserID: "u" + strconv.Itoa(i), Code: core.NewPairingCode(), RequestedAt: r.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	r.clock.Advance(core.PairingTTL + time.Minute)
	r.acceptFrom("newcomer", "n", "1", "hi")
	code := codeRE.FindStringSubmatch(r.next())[1]
	recs, err := r.db.Pairings(ctx, "fake")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Code != code {
		t.Fatalf("%d pairing rows after the newcomer's request; want theirs alone", len(recs))
	}
}
