package gateway_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// acceptFrom hands the gateway a message of user in chat.
func (r *rig) acceptFrom(user, chat, id, text string) {
	r.t.Helper()
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: chat}, MessageID: id, UserID: user, UserName: "name-" + user, Text: text, Private: true}
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
