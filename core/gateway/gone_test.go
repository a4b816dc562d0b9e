package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// goneChannel refuses every send but the answer to "next" as a platform
// does to a chat that blocked the bot or removed it.
type goneChannel struct {
	*fakeChannel
	mu      sync.Mutex
	refused []string
}

func (c *goneChannel) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	if part != "answer to next" {
		c.mu.Lock()
		c.refused = append(c.refused, part)
		c.mu.Unlock()
		return "", &core.Error{Kind: core.KindBadRequest, Msg: "fake send refused", Err: fmt.Errorf("%w: Forbidden: bot was blocked by the user", core.ErrRecipientGone)}
	}
	return c.fakeChannel.Send(ctx, to, part)
}

// An answer to a chat that blocked the bot is dropped: no apology is sent
// into the same refusal, and the operator is not told of a failed request
// (the user's choice, not the bot's trouble).
func TestAnswerToABlockedChatIsDropped(t *testing.T) {
	db := openDB(t, store.Options{})
	ev := &events{}
	fc := &fakeChannel{notify: make(chan string, 100)}
	ch := &goneChannel{fakeChannel: fc}
	r := runWith(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Events: ev}, ch, fc)
	r.accept("1", "hello")
	r.accept("2", "next")
	r.expect("answer to next") // the conversation's items run in order: "hello" is done

	ch.mu.Lock()
	refused := append([]string(nil), ch.refused...)
	ch.mu.Unlock()
	if len(refused) != 1 || refused[0] != "answer to hello" {
		t.Fatalf("sends refused: %q; want the answer alone, no apology after it", refused)
	}
	for _, e := range ev.all() {
		if e.Kind == core.EventRequestFailed {
			t.Fatalf("operator event %+v; a blocked chat is nobody's failure", e)
		}
	}
	counts, _ := db.QueueCounts(context.Background())
	if counts[core.StatusFailed] != 1 || counts[core.StatusQueued] != 0 {
		t.Fatalf("queue %v; want the blocked chat's request failed, not left to retry", counts)
	}
}

// A schedule's firing into a chat that takes no messages still fails
// loudly: the schedule's chat is for its owner to fix.
func TestFiringToABlockedChatStillTellsTheOperator(t *testing.T) {
	db := openDB(t, store.Options{})
	ev := &events{}
	fc := &fakeChannel{notify: make(chan string, 100)}
	ch := &goneChannel{fakeChannel: fc}
	r := runWith(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Events: ev, Firings: firingRunner{}, MaxAttempts: 1}, ch, fc)
	f := core.Firing{ScheduleID: 4, At: time.Now(), Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, Prompt: "report"}
	if _, err := r.g.EnqueueFiring(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, e := range ev.all() {
			if e.Kind == core.EventRequestFailed && strings.Contains(e.Message, "schedule #4") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v; want schedule #4's failure told", ev.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A message a plugin injected into a chat that takes no messages (an
// alert into an archived channel) still fails loudly: the plugin's chat
// is the operator's to fix, as a schedule's is.
func TestInjectedToABlockedChatStillTellsTheOperator(t *testing.T) {
	db := openDB(t, store.Options{})
	ev := &events{}
	fc := &fakeChannel{notify: make(chan string, 100)}
	ch := &goneChannel{fakeChannel: fc}
	r := runWith(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Events: ev, MaxAttempts: 1}, ch, fc)
	in := core.Inbound{Origin: "alerts", Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, UserID: "plugin", Text: "disk full"}
	if _, err := r.g.Inject(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, e := range ev.all() {
			if e.Kind == core.EventRequestFailed {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %+v; want the injected message's failure told", ev.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
