package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// cooling fails the question "hi" while every model cools (a long
// Retry-After) the first failures times, then answers; it answers other
// messages at once.
type cooling struct {
	fakeAgent
	failures int
}

func (a *cooling) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	a.calls++
	fail := t.Text == "hi" && a.failures > 0
	if fail {
		a.failures--
	}
	a.mu.Unlock()
	if fail {
		return core.Answer{}, &core.Error{Kind: core.KindRateLimited, Msg: "every model is cooling down", RetryAfter: 2 * time.Minute}
	}
	return core.Answer{Text: "answer to " + t.Text, Model: "fake/m"}, nil
}

// clockRig runs a gateway over a store on one fake clock.
type clockRig struct {
	*rig
	clock *clock.Fake
}

func newClockRig(t *testing.T, ag core.Agent, o gateway.Options) *clockRig {
	t.Helper()
	c := clock.NewFake(time.Now())
	db := openDB(t, store.Options{Now: c.Now})
	o.Store, o.Agent, o.Clock = db, ag, c
	if o.Pairings == nil {
		o.Pairings = db
	}
	return &clockRig{rig: runOn(t, db, o), clock: c}
}

// advance waits until request 1's attempt at the current time is over
// (it rests in the queue, due later), moves the clock and sends a
// message in another conversation. Waiting only for it not to run is
// not enough: a poke's answer may come before the dispatcher claims
// request 1 for that round, and request 1 would then be tried after the
// clock moved on and wait for a time the test never reaches.
//
// The clock passes request 1's due time on the way when d goes past it:
// the dispatcher's timer fires there, and request 1 may then be tried at
// that time as well as at the end (advanceToDue has one try).
func (r *clockRig) advance(d time.Duration, poke string) {
	r.t.Helper()
	r.resting()
	r.clock.Advance(d)
	r.poke(poke)
}

// advanceToDue is advance to the time request 1 is due: it is tried
// once, at that time.
func (r *clockRig) advanceToDue(poke string) {
	r.t.Helper()
	r.clock.Set(r.resting())
	r.poke(poke)
}

// resting waits until request 1 rests in the queue due after the
// current time, and says when it is due.
func (r *clockRig) resting() time.Time {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		it, st, err := r.db.QueueItem(context.Background(), 1)
		if err != nil {
			r.t.Fatal(err)
		}
		if st == core.StatusQueued && it.NotBefore.After(r.clock.Now()) {
			return it.NotBefore
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("request 1 is %s, due %v at %v; want it waiting for a later time", st, it.NotBefore, r.clock.Now())
		}
		time.Sleep(time.Millisecond)
	}
}

// poke sends a message in another conversation (answered "answer to
// poke"), which wakes the dispatcher.
func (r *clockRig) poke(poke string) {
	r.t.Helper()
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "poke-" + poke}, MessageID: poke, Text: "poke"}
	if err := r.g.Accept(context.Background(), in); err != nil {
		r.t.Fatal(err)
	}
}

// TestCoolingProviderMakesTheMessageWait (issue 9, finding 17): while
// every credential and model cools, the message waits in the queue
// without using up attempts; the user is told once, then answered.
func TestCoolingProviderMakesTheMessageWait(t *testing.T) {
	ag := &cooling{failures: 3}
	r := newClockRig(t, ag, gateway.Options{})
	r.accept("1", "hi")
	r.expect("⏳ Your answer is delayed: the AI provider asked me to slow down. I will answer in about 2 minutes.")
	// Each wait ends at the router's next probe (recheckEvery), before
	// the 2 minutes told: the clock moves to it, one try each.
	for i := range 2 {
		r.advanceToDue("p" + string(rune('a'+i)))
		r.expect("answer to poke")
	}
	// The retry after the third wait answers: as many cooling failures as
	// max_attempts, none of them counted, and one notice only.
	r.advanceToDue("pc")
	r.expectAny("answer to poke", "answer to hi")
	r.expectAny("answer to poke", "answer to hi")
	if ag.calls != 4+3 {
		t.Fatalf("agent called %d times, want 4 for hi and 3 pokes", ag.calls)
	}
}

// TestWaitingPastMaxWaitGivesUp: a message whose provider is cooling past
// queue.max_wait gets its last try when max_wait ends, then the apology
// saying when to try again.
func TestWaitingPastMaxWaitGivesUp(t *testing.T) {
	ag := &cooling{failures: 100}
	r := newClockRig(t, ag, gateway.Options{MaxWait: 3 * time.Minute})
	r.accept("1", "hi")
	r.expect("⏳ Your answer is delayed: the AI provider asked me to slow down. I will answer in about 2 minutes.")
	r.advance(2*time.Minute+time.Second, "pa")
	r.expect("answer to poke")
	r.advance(time.Minute, "pb")
	r.expectAny("answer to poke", "Sorry, I could not answer that: the AI provider is rate limiting me. Please try again in 2 minutes.")
	r.expectAny("answer to poke", "Sorry, I could not answer that: the AI provider is rate limiting me. Please try again in 2 minutes.")
}

// TestGivingUpDeliversAStoredReply (finding 3): a request given up after a
// reply was stored gets the reply's unsent parts, not an apology.
func TestGivingUpDeliversAStoredReply(t *testing.T) {
	ag := &fakeAgent{text: func(string) string { return "one|two" }}
	// The second part fails three times: the first attempt and both
	// retries; then the platform works again.
	ch := &fakeChannel{failSends: 3}
	r := newRig(t, ag, ch, nil)
	r.accept("1", "q")
	r.expect("one")
	r.expect("two")
	select {
	case got := <-ch.notify:
		t.Fatalf("sent %q after the stored reply; want no apology", got)
	case <-time.After(200 * time.Millisecond):
	}
	if ag.calls != 1 {
		t.Fatalf("agent called %d times", ag.calls)
	}
}

// failingStore fails the first n writes of an item's outcome.
type failingStore struct {
	*store.DB
	mu   sync.Mutex
	fail int
}

func (s *failingStore) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	s.mu.Lock()
	fail := s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("database or disk is full")
	}
	return s.DB.Finish(ctx, id, lease, status, cause)
}

// TestFailedStatusWriteDoesNotWedgeTheConversation (finding 4): a final
// status write that fails for a while is retried, and the conversation's
// next message is answered.
func TestFailedStatusWriteDoesNotWedgeTheConversation(t *testing.T) {
	db := openDB(t, store.Options{})
	r := runOn(t, db, gateway.Options{Store: &failingStore{DB: db, fail: 3}, Agent: &fakeAgent{}})
	r.accept("1", "first")
	r.expect("answer to first")
	r.accept("2", "second")
	r.expect("answer to second")
	if st, _, _, _ := db.QueueStatus(context.Background(), 1); st != core.StatusDone {
		t.Fatalf("first request is %s, want done", st)
	}
}

// TestExpiredLeaseIsTakenBack: a row left running under a lease that is
// not renewed (its claimer died or hangs) is taken back once the lease
// ends, and answered.
func TestExpiredLeaseIsTakenBack(t *testing.T) {
	c := clock.NewFake(time.Now())
	db := openDB(t, store.Options{Now: c.Now, LeaseTTL: 10 * time.Second})
	ctx := context.Background()
	// A row another claimer took and never finished.
	conv := core.ConversationKey{Channel: "fake", Chat: "orphan"}
	in := core.Inbound{Conversation: conv, MessageID: "o1", Text: "orphan"}
	orphan, _, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage, Conversation: conv, DedupeKey: "fake:m:o1", Message: &in})
	if err != nil {
		t.Fatal(err)
	}
	other, err := store.Open(ctx, filepath.Dir(db.Path()), store.Options{Now: c.Now, LeaseTTL: 10 * time.Second, Holder: "dead replica"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if items, _, err := other.Claim(ctx, 1, c.Now()); err != nil || len(items) != 1 {
		t.Fatalf("the other claimer: %+v, %v", items, err)
	}
	r := runOn(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Clock: c, LeaseTTL: 10 * time.Second})
	r.accept("0", "warm up")
	r.expect("answer to warm up")
	// Its lease must not run out under the clock's jump: wait until it is
	// finished.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, _, _, _ := db.QueueStatus(ctx, orphan+1); st == core.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the warm-up was not finished")
		}
	}
	c.Advance(11 * time.Second)
	r.accept("1", "poke")
	r.expectAny("answer to poke", "answer to orphan")
	r.expectAny("answer to poke", "answer to orphan")
	var it core.QueueItem
	var st string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if it, st, _ = db.QueueItem(ctx, orphan); st == core.StatusDone || time.Now().After(deadline) {
			break
		}
	}
	if st != core.StatusDone || it.Interruptions != 1 {
		t.Fatalf("the orphan: %s with %d interruptions; want done, one interruption", st, it.Interruptions)
	}
}

// slowAgent answers after d, watching its context.
type slowAgent struct {
	d       time.Duration
	mu      sync.Mutex
	calls   int
	stopped int // calls whose context ended first
}

func (a *slowAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	select {
	case <-time.After(a.d):
	case <-ctx.Done():
		a.mu.Lock()
		a.stopped++
		a.mu.Unlock()
		return core.Answer{}, ctx.Err()
	}
	text := "slow answer to " + t.Text
	return core.Answer{Text: text, Model: "fake/m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// TestLeaseIsRenewedWhileWorking: an answer that takes several lease TTLs
// keeps its claim (the gateway renews it), so it is answered once and not
// taken back.
func TestLeaseIsRenewedWhileWorking(t *testing.T) {
	// The answer takes one and a half leases; a renewal every third of
	// one leaves a slow machine more than a second of slack.
	const ttl = 2 * time.Second
	db := openDB(t, store.Options{LeaseTTL: ttl})
	ag := &slowAgent{d: ttl * 3 / 2}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, LeaseTTL: ttl})
	r.accept("1", "think hard")
	// Past the first lease, a claim looks at the queue again (the next
	// message): a lease that was not renewed would be taken back now.
	time.Sleep(ttl + ttl/4)
	r.accept("2", "next")
	r.expect("slow answer to think hard")
	r.expect("slow answer to next")
	var it core.QueueItem
	var st string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if it, st, _ = db.QueueItem(context.Background(), 1); st == core.StatusDone || time.Now().After(deadline) {
			break
		}
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if st != core.StatusDone || it.Interruptions != 0 || ag.calls != 2 {
		t.Fatalf("status %s, interruptions %d, agent calls %d; want each message answered once, never taken back", st, it.Interruptions, ag.calls)
	}
}

// lostLease is a store whose renewals find the lease gone.
type lostLease struct {
	*store.DB
	// lost says whether the lease is gone by now (a renewal before is
	// the store's).
	lost     func() bool
	mu       sync.Mutex
	finished int
}

func (s *lostLease) Renew(ctx context.Context, id, lease int64) error {
	if s.lost() {
		return core.ErrLeaseLost
	}
	return s.DB.Renew(ctx, id, lease)
}

func (s *lostLease) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	s.mu.Lock()
	s.finished++
	s.mu.Unlock()
	return s.DB.Finish(ctx, id, lease, status, cause)
}

// TestLostLeaseStopsTheWork: when the store says the lease is gone,
// the work stops at once and nothing of it is written or sent: the item
// is another claimer's.
func TestLostLeaseStopsTheWork(t *testing.T) {
	const ttl = 300 * time.Millisecond
	db := openDB(t, store.Options{LeaseTTL: time.Hour})
	ag := &slowAgent{d: time.Minute}
	// Lost once the agent works on it: on a loaded machine the first
	// renewal (a third of the TTL after the claim) may come before.
	st := &lostLease{DB: db, lost: func() bool {
		ag.mu.Lock()
		defer ag.mu.Unlock()
		return ag.calls > 0
	}}
	r := runOn(t, db, gateway.Options{Store: st, Agent: ag, LeaseTTL: ttl})
	r.accept("1", "think forever")
	deadline := time.Now().Add(10 * time.Second)
	for {
		ag.mu.Lock()
		called := ag.calls > 0
		ag.mu.Unlock()
		if called || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case got := <-r.ch.notify:
		t.Fatalf("sent %q after losing the lease", got)
	case <-time.After(4 * ttl):
	}
	st.mu.Lock()
	finished := st.finished
	st.mu.Unlock()
	ag.mu.Lock()
	stopped := ag.stopped
	ag.mu.Unlock()
	if stopped != 1 {
		t.Fatalf("the agent was stopped %d times; want its work cancelled when the lease was lost", stopped)
	}
	if status, _, _, _ := db.QueueStatus(context.Background(), 1); status != core.StatusRunning || finished != 0 {
		t.Fatalf("status %s, %d finish calls; want the item left to its new claimer", status, finished)
	}
}

// TestTooManyPendingMessagesAreRefused: past queue.max_pending a
// message is not taken, and its sender is told so: in a private chat
// the messages waiting are theirs, in a group they may be anyone's.
func TestTooManyPendingMessagesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name        string
		private     bool
		one, either string
	}{{
		name:    "private",
		private: true,
		one:     "I am still working on your earlier messages, so I did not take this one. Please send it again once I have answered them.",
		either:  "I am still working on your earlier messages, so I did not take this one either. Please send it again once I have answered them.",
	}, {
		name:   "group",
		one:    "I am still working on earlier messages in this chat, so I did not take this one. Please send it again in a little while.",
		either: "I am still working on earlier messages in this chat, so I did not take this one either. Please send it again in a little while.",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, store.Options{})
			ag, unblock := heldAgent()
			r := runOn(t, db, gateway.Options{Store: db, Agent: ag, MaxPending: 3})
			t.Cleanup(unblock)
			ctx := context.Background()
			for i, text := range []string{"slow", "more", "more", "more", "more"} {
				// In a group each message is another person's first.
				user := fmt.Sprint("u", i)
				if tc.private {
					user = "u"
				}
				r.acceptIn(core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: fmt.Sprint(i + 1), UserID: user, Text: text, Private: tc.private})
			}
			// Each message refused (the 4th and the 5th) is told so: the
			// notice answers it, so the user knows which to send again
			// (in a private chat the 5th's says "either" when it was
			// refused while the 4th's was being sent).
			r.expect(tc.one)
			r.expectAny(tc.one, tc.either)
			counts, _ := db.QueueCounts(ctx)
			if n := counts[core.StatusQueued] + counts[core.StatusRunning]; n != 3 {
				t.Fatalf("pending = %d (%v), want 3", n, counts)
			}
			unblock()
			for range 3 {
				r.expectAny("answer to slow", "answer to more")
			}
		})
	}
}

// fullRig runs a gateway whose conversations take one pending message,
// whose agent answers "slow" only after unblock and whose channel sends
// nothing until unhold (both also run before the gateway's shutdown, so
// a failure does not hang it).
func fullRig(t *testing.T) (r *rig, unhold, unblock func()) {
	t.Helper()
	db := openDB(t, store.Options{})
	ag, unblock := heldAgent()
	r = runOn(t, db, gateway.Options{Store: db, Agent: ag, MaxPending: 1})
	hold := make(chan struct{})
	r.ch.mu.Lock()
	r.ch.hold = hold
	r.ch.mu.Unlock()
	unhold = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(func() { unhold(); unblock() })
	return r, unhold, unblock
}

// heldAgent answers "answer to <text>", to "slow" only after unblock.
// A test registers unblock as a cleanup after starting the gateway, so
// it runs before the gateway's shutdown and a failure does not hang it.
func heldAgent() (ag *fakeAgent, unblock func()) {
	block := make(chan struct{})
	unblock = sync.OnceFunc(func() { close(block) })
	return &fakeAgent{text: func(q string) string {
		if q == "slow" {
			<-block
		}
		return "answer to " + q
	}}, unblock
}

// TestFullNoticesOneAtATime: while a notice to a sender is being sent,
// their messages refused meanwhile are told in one notice after it, in
// reply to the last of them, not one notice each.
func TestFullNoticesOneAtATime(t *testing.T) {
	r, unhold, unblock := fullRig(t)
	r.accept("1", "slow")
	for i := 2; i <= 6; i++ {
		r.accept(string(rune('0'+i)), "more")
	}
	unhold()
	// r.accept's conversation is a group: its wording.
	r.expect("I am still working on earlier messages in this chat, so I did not take this one. Please send it again in a little while.")
	r.expect("I am still working on earlier messages in this chat, so I did not take your last 4 messages either, up to this one. Please send them again in a little while.")
	select {
	case got := <-r.ch.notify:
		t.Fatalf("a third notice for five refused messages: %q", got)
	case <-time.After(300 * time.Millisecond):
	}
	unblock()
	r.expect("answer to slow")
}

// TestFullNoticesBySender: in a group, each sender is told of their own
// refused messages.
func TestFullNoticesBySender(t *testing.T) {
	r, unhold, unblock := fullRig(t)
	for i, user := range []string{"a", "a", "b", "b"} {
		text := "more"
		if i == 0 {
			text = "slow"
		}
		r.acceptIn(core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: fmt.Sprint(i + 1), UserID: user, Text: text})
	}
	unhold()
	got := map[string]int{}
	for range 3 {
		select {
		case n := <-r.ch.notify:
			got[n]++
		case <-time.After(30 * time.Second):
			t.Fatalf("notices so far %v; want three", got)
		}
	}
	one := "I am still working on earlier messages in this chat, so I did not take this one. Please send it again in a little while."
	either := "I am still working on earlier messages in this chat, so I did not take this one either. Please send it again in a little while."
	if got[one] != 2 || got[either] != 1 {
		t.Fatalf("notices %v; want one to a and two to b (the second told after the first)", got)
	}
	unblock()
	r.expect("answer to slow")
}

// TestShutdownIsNoAttempt (finding 3): a request cut short by a graceful
// shutdown is not counted as an attempt or an interruption.
func TestShutdownIsNoAttempt(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	started := make(chan struct{}, 10)
	ag := &ctxAgent{started: started}
	for round := range 4 {
		ch := &fakeChannel{notify: make(chan string, 10)}
		g := gateway.New(gateway.Options{Store: db, Agent: ag, MaxAttempts: 3})
		g.AddChannel(ch)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx, 50*time.Millisecond) }()
		if round == 0 {
			(&rig{t: t, g: g, ch: ch, db: db}).accept("1", "slow")
		}
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the request did not start", round)
		}
		cancel()
		<-done
	}
	st, attempts, _, _ := db.QueueStatus(context.Background(), 1)
	if st != core.StatusQueued || attempts != 0 {
		t.Fatalf("after four shutdowns: status %s attempts %d; want queued with no attempt counted", st, attempts)
	}
	items, _, _ := db.Claim(context.Background(), 1, time.Now())
	if len(items) != 1 || items[0].Interruptions != 0 {
		t.Fatalf("claimed %+v; want the request with no interruption", items)
	}
}

// ctxAgent blocks until its context ends.
type ctxAgent struct{ started chan struct{} }

func (a *ctxAgent) Answer(ctx context.Context, _ core.Turn) (core.Answer, error) {
	a.started <- struct{}{}
	<-ctx.Done()
	return core.Answer{}, ctx.Err()
}

// flakyLookup fails ReplyByPlatformID while failing is set.
type flakyLookup struct {
	*store.DB
	mu      sync.Mutex
	failing int
}

func (s *flakyLookup) ReplyByPlatformID(ctx context.Context, channel, id string) (*core.Reply, error) {
	s.mu.Lock()
	fail := s.failing > 0
	if fail {
		s.failing--
	}
	s.mu.Unlock()
	if fail {
		return nil, &core.Error{Kind: core.KindUnavailable, Msg: "database is locked"}
	}
	return s.DB.ReplyByPlatformID(ctx, channel, id)
}

// TestReactionSignalSurvivesATransientFailure (finding 7): a reaction
// whose first attempt fails before its signal is recorded still records
// it on the retry, once.
func TestReactionSignalSurvivesATransientFailure(t *testing.T) {
	db := openDB(t, store.Options{})
	fl := &flakyLookup{DB: db}
	sig := &signals{}
	r := runOn(t, db, gateway.Options{Store: fl, Agent: &fakeAgent{}, Signals: sig, Backoff: func(int) time.Duration { return time.Millisecond }})
	ctx, g := context.Background(), r.g
	r.accept("1", "q")
	r.expect("answer to q")
	waitSent(t, db, 1)
	conv := core.ConversationKey{Channel: "fake", Chat: "c"}
	if err := g.React(ctx, core.Reaction{Conversation: conv, EventID: "r1", MessageID: "p1", UserID: "u", Added: true, Polarity: core.Negative}); err != nil {
		t.Fatal(err)
	}
	fl.mu.Lock()
	fl.failing = 1 // the handler's lookup fails once
	fl.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sig.mu.Lock()
		n := len(sig.got)
		sig.mu.Unlock()
		if n >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	sig.mu.Lock()
	defer sig.mu.Unlock()
	if len(sig.got) != 1 || sig.got[0].RequestID == 0 || sig.got[0].Polarity != core.Negative {
		t.Fatalf("signals = %+v; want the reaction's negative signal once, keyed by its request", sig.got)
	}
}

// waitSent waits until reply id has its first part recorded.
func waitSent(t *testing.T, db *store.DB, id int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := db.Reply(context.Background(), id)
		if err == nil && r != nil && len(r.Sent) > 0 && r.Sent[0] != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reply %d never recorded as sent", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReactionJoinsItsTopicsConversation (finding 15): a reaction whose
// platform does not say in which topic it was made is queued in the
// conversation of the reply it judges, so its re-answer is ordered with
// that topic's messages.
func TestReactionJoinsItsTopicsConversation(t *testing.T) {
	r := newRig(t, &fakeAgent{}, &fakeChannel{}, func(g *gateway.Gateway) { g.AddInterceptor(escalate{}) })
	topic := core.ConversationKey{Channel: "fake", Chat: "c", Thread: "7"}
	in := core.Inbound{Conversation: topic, MessageID: "m1", UserID: "u", Text: "q"}
	for r.g.Accept(context.Background(), in) != nil {
		time.Sleep(time.Millisecond) // until the gateway runs
	}
	r.expect("answer to q")
	waitSent(t, r.db, 1)
	if err := r.g.React(context.Background(), core.Reaction{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, EventID: "r1", MessageID: "p1", UserID: "u", Added: true, Polarity: core.Negative}); err != nil {
		t.Fatal(err)
	}
	r.expect("better answer than answer to q")
	it, _, err := r.db.QueueItem(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if it.Kind != core.EventReaction || it.Conversation != topic {
		t.Fatalf("the reaction was queued as %s in %v, want the topic %v", it.Kind, it.Conversation, topic)
	}
}

// dying is the store of a process that is killed: once dead, it claims
// nothing and its writes go nowhere.
type dying struct {
	*store.DB
	dead atomic.Bool
}

func (s *dying) Claim(ctx context.Context, n int, now time.Time) ([]core.QueueItem, time.Time, error) {
	if s.dead.Load() {
		return nil, time.Time{}, errors.New("the process was killed")
	}
	return s.DB.Claim(ctx, n, now)
}

func (s *dying) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	if s.dead.Load() {
		return nil
	}
	return s.DB.Finish(ctx, id, lease, status, cause)
}

func (s *dying) MarkSent(ctx context.Context, replyID int64, part int, platformID string) error {
	if s.dead.Load() {
		return errors.New("the process was killed")
	}
	return s.DB.MarkSent(ctx, replyID, part, platformID)
}

// stuck is a channel whose sends from part from on hang until release
// is closed (then fail), the parts before it sent: the process is killed
// while it sends.
type stuck struct {
	fakeChannel
	from    int
	sending chan struct{}
	release chan struct{}
}

func newStuck(from int) *stuck {
	return &stuck{fakeChannel: fakeChannel{notify: make(chan string, 10)}, from: from, sending: make(chan struct{}, 1), release: make(chan struct{})}
}

func (c *stuck) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	if to.Part < c.from {
		return c.fakeChannel.Send(ctx, to, part)
	}
	select {
	case c.sending <- struct{}{}:
	default:
	}
	<-c.release
	return "", errors.New("the process was killed")
}

// soleOpener opens dir's database as a process alone on it does at its
// start (its first claim takes back what the process before left).
func soleOpener(t *testing.T, dir string) func() *store.DB {
	return func() *store.DB {
		t.Helper()
		db, err := store.Open(context.Background(), dir, store.Options{SoleClaimer: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}

// killWhileSending runs a gateway on db with ag and ch, hands it a
// message and kills it (its store goes dead) once ch is sending; what
// says what the send was, for the failure.
func killWhileSending(t *testing.T, db *store.DB, ag core.Agent, ch *stuck, what string) {
	t.Helper()
	first := &dying{DB: db}
	g := gateway.New(gateway.Options{Store: first, Agent: ag})
	g.AddChannel(ch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() { close(ch.release); cancel(); <-done })
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "1", UserID: "u", Text: "hello"}
	for g.Accept(context.Background(), in) != nil {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-ch.sending:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s was never sent", what)
	}
	first.dead.Store(true)
}

// TestKillWhileTellingAFailureTellsItAfterTheRestart: a process killed
// while it tells the user that their message failed for good must not
// have recorded the failure yet: the next start tells them. (Recorded
// first, the message was failed and never answered: the crash-loop e2e
// test's "m76 has no answer".)
func TestKillWhileTellingAFailureTellsItAfterTheRestart(t *testing.T) {
	openSole := soleOpener(t, t.TempDir())
	ag := &fakeAgent{fail: 100, kind: core.KindInvalid}
	killWhileSending(t, openSole(), ag, newStuck(0), "the failure")

	// The next start: a process alone on the database again.
	db := openSole()
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag})
	r.expect("Sorry, I could not answer that: llm failed")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		st, _, _, _ := db.QueueStatus(context.Background(), 1)
		if st == core.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("request 1 is %s after the restart told the user; want failed", st)
		}
	}
}

// TestGiveUpCutShortTwiceIsRecordedBeforeTelling: an item whose give-up
// was already cut short (interrupted past max_attempts) is failed before
// the user is told, so a telling that kills the process cannot loop.
func TestGiveUpCutShortTwiceIsRecordedBeforeTelling(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "fake", Chat: "c"}
	in := core.Inbound{Conversation: conv, MessageID: "poison", UserID: "u", Text: "crashes the process"}
	// Four starts that each died while the message ran (the last one
	// while it gave up): each a process alone on the database, whose
	// first claim takes back what the one before left.
	for i := range 4 {
		db, err := store.Open(ctx, dir, store.Options{SoleClaimer: true})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, _, err := db.Enqueue(ctx, core.QueueItem{Kind: core.EventMessage, Conversation: conv, DedupeKey: "fake:m:poison", Message: &in}); err != nil {
				t.Fatal(err)
			}
		}
		if items, _, err := db.Claim(ctx, 1, time.Now()); err != nil || len(items) != 1 {
			t.Fatalf("start %d claimed %+v, %v", i, items, err)
		}
		db.Close()
	}
	db, err := store.Open(ctx, dir, store.Options{SoleClaimer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ch := newStuck(0)
	g := gateway.New(gateway.Options{Store: db, Agent: &fakeAgent{}, MaxAttempts: 3})
	g.AddChannel(ch)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(runCtx, 5*time.Second) }()
	t.Cleanup(func() { close(ch.release); cancel(); <-done })
	select {
	case <-ch.sending:
	case <-time.After(30 * time.Second):
		t.Fatal("the user was never told")
	}
	if st, _, _, _ := db.QueueStatus(ctx, 1); st != core.StatusFailed {
		t.Fatalf("request 1 is %s while the user is told; want failed first", st)
	}
}

// failingRenewal is a store whose renewals fail (the database out of
// reach) while the process cannot tell whether its lease still holds.
type failingRenewal struct {
	*store.DB
	mu      sync.Mutex
	renewed int // renewals tried
	ended   int // finishes
}

func (s *failingRenewal) Renew(ctx context.Context, id, lease int64) error {
	s.mu.Lock()
	s.renewed++
	s.mu.Unlock()
	return errors.New("database out of reach")
}

func (s *failingRenewal) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	s.mu.Lock()
	s.ended++
	s.mu.Unlock()
	return s.DB.Finish(ctx, id, lease, status, cause)
}

// TestNoSendPastTheLease: work whose lease went by without a renewal (a
// process stalled past it, or cut off from the database; another claimer
// may have taken the item and answered) sends nothing: the send is fenced
// a sixth of the TTL before the lease would end, as the work of a
// singleton lease is.
func TestNoSendPastTheLease(t *testing.T) {
	const ttl = 30 * time.Second
	c := clock.NewFake(time.Now())
	db := openDB(t, store.Options{LeaseTTL: time.Hour})
	ag, unblock := heldAgent()
	t.Cleanup(unblock)
	st := &failingRenewal{DB: db}
	r := runOn(t, db, gateway.Options{Store: st, Agent: ag, Clock: c, LeaseTTL: ttl})
	r.accept("1", "slow")
	// The work is under way (the agent holds it) when the renewals are
	// due, and each fails.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.Advance(ttl / 3)
		st.mu.Lock()
		n := st.renewed
		st.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal was tried")
		}
	}
	unblock() // the answer is ready past the lease
	select {
	case got := <-r.ch.notify:
		t.Fatalf("sent %q past the lease", got)
	case <-time.After(500 * time.Millisecond):
	}
	st.mu.Lock()
	ended := st.ended
	st.mu.Unlock()
	if status, _, _, _ := db.QueueStatus(context.Background(), 1); status != core.StatusRunning || ended != 0 {
		t.Fatalf("status %s, %d finishes; want the item left to the claimer that takes it", status, ended)
	}
}

// TestKillDuringALaterPartSendsTheEarlierOnesOnce: a process killed while
// it sends the second part of an answer (a platform's pacing or a 429
// holds that send for seconds) has recorded the first: the next start
// sends the rest, not the first part again. (Its record used to be
// written only after the next part's send returned.)
func TestKillDuringALaterPartSendsTheEarlierOnesOnce(t *testing.T) {
	openSole := soleOpener(t, t.TempDir())
	ag := &fakeAgent{text: func(string) string { return "one|two|three" }}
	killWhileSending(t, openSole(), ag, newStuck(1), "the second part")

	db := openSole()
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag})
	// The first part again would come first.
	r.expect("two")
	r.expect("three")
}

// uncappedChannel is the fake channel as the console: its lines are all
// queued (core.Uncapped).
type uncappedChannel struct{ *fakeChannel }

func (uncappedChannel) Uncapped() bool { return true }

// The console's operator may pipe in more lines than queue.max_pending:
// each is queued and answered, none refused.
func TestUncappedChannelQueuesPastMaxPending(t *testing.T) {
	db := openDB(t, store.Options{})
	ag, unblock := heldAgent()
	fc := &fakeChannel{notify: make(chan string, 100)}
	r := runWith(t, db, gateway.Options{Store: db, Agent: ag, MaxPending: 2}, uncappedChannel{fc}, fc)
	t.Cleanup(unblock)
	for i, text := range []string{"slow", "more", "more", "more", "more"} {
		r.accept(fmt.Sprint(i+1), text)
	}
	counts, err := db.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := counts[core.StatusQueued] + counts[core.StatusRunning]; n != 5 {
		t.Fatalf("pending = %d (%v); want all 5 lines queued", n, counts)
	}
	unblock()
	for range 5 {
		r.expectAny("answer to slow", "answer to more")
	}
}
