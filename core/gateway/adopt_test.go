package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// errOutOfReach is what unreachableStore's calls fail with while it is
// down: a database the network cannot reach for now.
var errOutOfReach = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

// unreachableStore goes out of reach at the first write of an item's
// outcome (after the answer was sent) and stays so until up is called:
// every write of an outcome and every renewal fails meanwhile. It says
// its failures are the store being out of reach (store.DB.Unreachable).
type unreachableStore struct {
	*store.DB
	mu       sync.Mutex
	down     bool
	wentDown bool
	tries    int // writes of an outcome tried while down
	changed  chan struct{}
}

func (s *unreachableStore) Unreachable(err error) bool { return errors.Is(err, errOutOfReach) }

// fail says whether a write of an outcome fails now (it goes down at the
// first).
func (s *unreachableStore) fail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wentDown {
		s.wentDown, s.down = true, true
	}
	if s.down {
		s.tries++
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	return s.down
}

func (s *unreachableStore) up() {
	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
}

func (s *unreachableStore) triesDown() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries
}

func (s *unreachableStore) Finish(ctx context.Context, id, lease int64, status, cause string) error {
	if s.fail() {
		return errOutOfReach
	}
	return s.DB.Finish(ctx, id, lease, status, cause)
}

func (s *unreachableStore) FinishSent(ctx context.Context, id, lease int64, sent core.PartSent) error {
	if s.fail() {
		return errOutOfReach
	}
	return s.DB.FinishSent(ctx, id, lease, sent)
}

func (s *unreachableStore) Renew(ctx context.Context, id, lease int64) error {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		return errOutOfReach
	}
	return s.DB.Renew(ctx, id, lease)
}

// TestAnswerSentWhileTheStoreIsAwayIsNotSentAgain: the answer was sent,
// and the store went out of reach before its delivery was recorded; it
// stayed away past the item's lease. Once it is back, the answer is
// recorded, not sent a second time: the gateway keeps trying to record it
// (it used to give up after six tries), and when its own claim takes the
// item back (the lease ran out) it hands the new lease to the work still
// recording it instead of running the item again.
func TestAnswerSentWhileTheStoreIsAwayIsNotSentAgain(t *testing.T) {
	const ttl = 10 * time.Second
	c := clock.NewFake(time.Now())
	db := openDB(t, store.Options{Now: c.Now, LeaseTTL: ttl})
	st := &unreachableStore{DB: db, changed: make(chan struct{}, 1)}
	ag := &fakeAgent{}
	r := runOn(t, db, gateway.Options{Store: st, Agent: ag, Clock: c, LeaseTTL: ttl})
	r.accept("1", "first")
	r.expect("answer to first")
	// Past the lease, and past the six tries the record used to give up
	// after.
	outlastLease(t, c, st, ttl, 8)
	st.up()
	// The next message of the conversation has the dispatcher claim its
	// head, the item answered: its lease ran out, so the claim takes it
	// back (an interruption).
	r.accept("2", "second")
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, _, lastErr, _ := db.QueueStatus(ctx, 1); strings.Contains(lastErr, "interrupted") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answered item's lease was not taken back")
		}
	}
	// The claim counted an interruption; the work was never cut short,
	// and the count is taken back (repeated outages must not add up to
	// the poison-message guard's give-up).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if it, _, _ := db.QueueItem(ctx, 1); it.Interruptions == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the interruption the claim counted for the work still in flight was not taken back")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st, _, _, _ := db.QueueStatus(ctx, 1); st == core.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answered item was not recorded done")
		}
		c.Advance(500 * time.Millisecond) // the record's next try
		time.Sleep(5 * time.Millisecond)
	}
	r.expect("answer to second")
	r.nothingSent(200 * time.Millisecond)
	ag.mu.Lock()
	calls := ag.calls
	ag.mu.Unlock()
	if calls != 2 {
		t.Fatalf("the agent was called %d times; want once per message", calls)
	}
}

// logWatch is a slog handler that tells each record's message to seen
// (dropped when nobody reads it) and keeps them all.
type logWatch struct {
	mu   sync.Mutex
	msgs []string
	seen chan string
}

func newLogWatch() *logWatch { return &logWatch{seen: make(chan string, 1024)} }

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.msgs = append(w.msgs, r.Message)
	w.mu.Unlock()
	select {
	case w.seen <- r.Message:
	default:
	}
	return nil
}
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

// said says whether a logged message contains s.
func (w *logWatch) said(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// adoptLog is what Gateway.adopt logs when it hands a claim's lease to
// work still in flight.
const adoptLog = "took back the lease of a request still being worked on here"

// blockingObserver calls at, once, at the first attempt's end that
// waits (OutcomeWaiting), before the work returns.
type blockingObserver struct {
	once sync.Once
	at   func()
}

func (*blockingObserver) Accepted(string)                         {}
func (*blockingObserver) Stage(string, core.Stage, time.Duration) {}
func (*blockingObserver) HookFailed(string, core.Stage)           {}
func (o *blockingObserver) Finished(_ string, _ core.EventKind, out core.Outcome) {
	if out == core.OutcomeWaiting {
		o.once.Do(o.at)
	}
}

// TestAClaimOfAnItemItsWorkPutBackRunsIt: the work on an item put it
// back to wait for a cooling provider (its outcome written), and the
// provider came back before the work returned; the dispatcher's claim,
// which finds the item due again while it is still registered in flight,
// must run it, not hand its lease to work that has ended: no one would
// answer it until its lease ran out.
func TestAClaimOfAnItemItsWorkPutBackRunsIt(t *testing.T) {
	db := openDB(t, store.Options{})
	// Back in a second: no delay notice is sent.
	ag := &fakeAgent{fail: 1, kind: core.KindRateLimited, retryAfter: time.Second}
	second := make(chan struct{})
	var calls sync.Once
	ag.text = func(s string) string {
		calls.Do(func() { close(second) })
		return "answer to " + s
	}
	logs := newLogWatch()
	var gw atomic.Pointer[gateway.Gateway]
	var adopted atomic.Bool
	decided := make(chan struct{})
	obs := &blockingObserver{at: func() {
		defer close(decided)
		// The provider is back as the work ends: the item is due now.
		gw.Load().ProviderBack("p")
		for {
			select {
			case <-second:
				return
			case m := <-logs.seen:
				if strings.Contains(m, adoptLog) {
					adopted.Store(true)
					return
				}
			case <-time.After(30 * time.Second):
				t.Errorf("the item put back was neither claimed again nor run: %q", logs.msgs)
				return
			}
		}
	}}
	r := runOn(t, db, gateway.Options{Store: db, Agent: ag, Observer: obs, Workers: 2, Logger: slog.New(logs),
		Backoff: func(int) time.Duration { return time.Millisecond }})
	gw.Store(r.g)
	r.accept("1", "hi")
	<-decided
	if adopted.Load() {
		t.Fatal("the claim handed its lease to the work that had put the item back; nothing runs it")
	}
	r.expect("answer to hi")
}

// heldClaimStore is an unreachableStore whose claims fail too while it
// is down, and whose first claim that takes item 1 back is held after
// it was made (the item's token bumped) until proceed is closed; claimed
// is closed then.
type heldClaimStore struct {
	*unreachableStore
	once    sync.Once
	claimed chan struct{}
	proceed chan struct{}
}

func newHeldClaimStore(db *store.DB) *heldClaimStore {
	return &heldClaimStore{
		unreachableStore: &unreachableStore{DB: db, changed: make(chan struct{}, 1)},
		claimed:          make(chan struct{}),
		proceed:          make(chan struct{}),
	}
}

func (s *heldClaimStore) Claim(ctx context.Context, n int, now time.Time) ([]core.QueueItem, time.Time, error) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		return nil, time.Time{}, errOutOfReach
	}
	items, next, err := s.DB.Claim(ctx, n, now)
	for _, it := range items {
		if it.ID == 1 && it.Interruptions > 0 {
			s.once.Do(func() {
				close(s.claimed)
				<-s.proceed
			})
		}
	}
	return items, next, err
}

// TestAWriteThatFindsTheLeaseLostToThisProcesssClaimGoesOn: the answer
// was sent and the store went away before its delivery was recorded, past
// the item's lease. Once the store is back the dispatcher's claim takes
// the item back, bumping its token, and the record's next try, under the
// old token, finds the lease lost before the dispatcher has handed the
// new one over (Gateway.adopt). The record must not give the item up as
// another claimer's (the claim would then run it again, and send the
// answer twice): it waits for the claim under way and writes under the
// lease handed over.
func TestAWriteThatFindsTheLeaseLostToThisProcesssClaimGoesOn(t *testing.T) {
	const ttl = 10 * time.Second
	c := clock.NewFake(time.Now())
	db := openDB(t, store.Options{Now: c.Now, LeaseTTL: ttl})
	st := newHeldClaimStore(db)
	logs := newLogWatch()
	ag := &fakeAgent{}
	r := runOn(t, db, gateway.Options{Store: st, Agent: ag, Clock: c, LeaseTTL: ttl, Workers: 2, Logger: slog.New(logs)})
	r.accept("1", "first")
	r.expect("answer to first")
	// The store is away past the lease; the record keeps trying.
	outlastLease(t, c, st.unreachableStore, ttl, 0)
	st.up()
	// The conversation's next message has the dispatcher claim its head:
	// the answered item, whose lease ran out.
	r.accept("2", "second")
	select {
	case <-st.claimed:
	case <-time.After(30 * time.Second):
		logs.mu.Lock()
		t.Fatalf("the answered item's lease was not taken back: %q", logs.msgs)
	}
	// The record's next try, under the old token, while the claim has not
	// handed the new one over yet.
	for waiting := false; !waiting; {
		c.Advance(500 * time.Millisecond)
		select {
		case m := <-logs.seen:
			switch {
			case strings.Contains(m, "the lease was lost; another claimer answers the request"):
				t.Error("the record gave the item up as another claimer's; it was this process's claim")
				waiting = true
			case strings.Contains(m, "waiting for this process's claim under way"):
				waiting = true
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the record did not try again")
		}
	}
	close(st.proceed)
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, _, _, _ := db.QueueStatus(ctx, 1); s == core.StatusDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answered item was not recorded done")
		}
	}
	r.expect("answer to second")
	r.nothingSent(200 * time.Millisecond)
	ag.mu.Lock()
	calls := ag.calls
	ag.mu.Unlock()
	if calls != 2 {
		t.Fatalf("the agent was called %d times; want once per message", calls)
	}
}

// outlastLease moves the fake clock c past the lease ttl while the
// record keeps trying to write to st (at least tries times), and returns
// once a try failed after the clock's last move: the record then sleeps
// until it moves again, so a claim the test makes next comes first. The
// clock moves on whether or not the record's sleep began (its try and
// its sleep are not one step).
func outlastLease(t *testing.T, c *clock.Fake, st *unreachableStore, ttl time.Duration, tries int) {
	t.Helper()
	advanced := time.Duration(0)
	for deadline := time.Now().Add(20 * time.Second); advanced <= ttl || st.triesDown() < tries; {
		select {
		case <-st.changed:
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes of the outcome were tried (clock advanced %s); want the record to go on trying", st.triesDown(), advanced)
		}
		c.Advance(500 * time.Millisecond)
		advanced += 500 * time.Millisecond
	}
	// The record's try and its sleep are not one step either: a move of
	// the clock before its sleep began wakes nothing, so the clock moves
	// until a try follows one.
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-st.changed:
		default:
		}
		c.Advance(500 * time.Millisecond)
		select {
		case <-st.changed:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the record stopped trying")
		}
	}
}

// gateAgent answers "slow" once gate is closed (or its context ends,
// which it counts), anything else at once; it holds no lock meanwhile.
type gateAgent struct {
	gate    chan struct{}
	calls   atomic.Int32
	stopped atomic.Int32
}

func (a *gateAgent) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	a.calls.Add(1)
	if t.Text == "slow" {
		select {
		case <-a.gate:
		case <-ctx.Done():
			a.stopped.Add(1)
			return core.Answer{}, ctx.Err()
		}
	}
	text := "answer to " + t.Text
	return core.Answer{Text: text, Model: "fake/m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

// goDown takes the store out of reach now.
func (s *unreachableStore) goDown() {
	s.mu.Lock()
	s.wentDown, s.down = true, true
	s.mu.Unlock()
}

// TestARenewalThatFindsTheLeaseLostToThisProcesssClaimGoesOn: the store
// was out of reach while an answer was being written, past the item's
// lease. Once it is back the dispatcher's claim takes the item back,
// bumping its token, and a renewal under the old token finds the lease
// lost before the dispatcher has handed the new one over (Gateway.adopt).
// The renewal must not stop the work (the claim would then run the item
// again, a second LLM call): it waits for the claim under way, and the
// work goes on under the lease handed over.
func TestARenewalThatFindsTheLeaseLostToThisProcesssClaimGoesOn(t *testing.T) {
	const ttl = 30 * time.Second
	c := clock.NewFake(time.Now())
	db := openDB(t, store.Options{Now: c.Now, LeaseTTL: ttl})
	st := newHeldClaimStore(db)
	logs := newLogWatch()
	ag := &gateAgent{gate: make(chan struct{})}
	r := runOn(t, db, gateway.Options{Store: st, Agent: ag, Clock: c, LeaseTTL: ttl, Workers: 2, Logger: slog.New(logs)})
	t.Cleanup(func() {
		select {
		case <-ag.gate:
		default:
			close(ag.gate)
		}
	})
	r.accept("1", "slow")
	for deadline := time.Now().Add(10 * time.Second); ag.calls.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent was not called")
		}
	}
	// Out of reach for the lease's length: each renewal fails.
	st.goDown()
	for renewed := 0; renewed < 3; {
		c.Advance(ttl / 3)
		for deadline := time.Now().Add(10 * time.Second); ; {
			m := ""
			select {
			case m = <-logs.seen:
			case <-time.After(time.Until(deadline)):
				t.Fatalf("renewal %d was not tried", renewed+1)
			}
			if strings.Contains(m, "renew the request's lease") {
				renewed++
				break
			}
		}
	}
	c.Advance(time.Second) // past the lease
	st.up()
	// The conversation's next message has the dispatcher claim its head:
	// the item being answered, whose lease ran out.
	r.accept("2", "second")
	select {
	case <-st.claimed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the item's lease was not taken back: %q", logs.msgs)
	}
	// The next renewal, under the old token, while the claim has not
	// handed the new one over yet. The fake clock runs it inside Advance,
	// where it waits for the claim: Advance returns once the claim goes on.
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		c.Advance(ttl / 3)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		m := ""
		select {
		case m = <-logs.seen:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("the renewal did not wait for the claim under way: %q", logs.msgs)
		}
		if strings.Contains(m, "this work stops") {
			t.Fatal("the renewal stopped the work; the lease was this process's claim's")
		}
		if strings.Contains(m, "renew the request's lease: lost; waiting for this process's claim under way") {
			break
		}
	}
	close(st.proceed)
	<-advanced
	close(ag.gate)
	r.expect("answer to slow")
	r.expect("answer to second")
	if calls, stopped := ag.calls.Load(), ag.stopped.Load(); calls != 2 || stopped != 0 {
		t.Fatalf("the agent was called %d times, %d of them stopped; want one call per message, none stopped", calls, stopped)
	}
	if logs.said("this work stops") {
		t.Fatal("the renewal stopped the work")
	}
}
