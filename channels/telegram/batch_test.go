package telegram

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
)

// batchSink records the order of each chat's messages, fails the first
// message of failChat once, and holds the first message of waitChat until
// a message of another chat arrives (or a timeout, noted).
type batchSink struct {
	*fakeSink
	mu2      sync.Mutex
	order    map[string][]string
	failChat string
	failed   bool
	waitChat string
	other    chan struct{}
	once     sync.Once
	alone    bool // waitChat's first message waited in vain
}

func (s *batchSink) Accept(ctx context.Context, in core.Inbound) error {
	if in.Conversation.Chat != s.waitChat {
		s.once.Do(func() { close(s.other) })
	} else {
		select {
		case <-s.other:
		case <-time.After(5 * time.Second):
			s.mu2.Lock()
			s.alone = true
			s.mu2.Unlock()
		}
	}
	s.mu2.Lock()
	if in.Conversation.Chat == s.failChat && !s.failed {
		s.failed = true
		s.mu2.Unlock()
		return errors.New("database is locked")
	}
	s.order[in.Conversation.Chat] = append(s.order[in.Conversation.Chat], in.Text)
	s.mu2.Unlock()
	return s.fakeSink.Accept(ctx, in)
}

// The chats of one getUpdates batch are handed over side by side, each
// chat's updates in order; a failed update keeps the offset at it (the
// updates after it are read again, the committed ones as duplicates), so
// nothing is acknowledged before it is committed.
func TestBatchChatsSideBySideInOrder(t *testing.T) {
	h := newHarness(t, nil)
	sink := &batchSink{fakeSink: newFakeSink(), order: map[string][]string{}, failChat: "43", waitChat: "42", other: make(chan struct{})}
	var ids []int64
	for _, u := range []struct {
		from *models.User
		text string
	}{{alice, "a1"}, {alice, "a2"}, {bob, "b1"}, {alice, "a3"}, {bob, "b2"}} {
		ids = append(ids, h.srv.AddUpdate(h.srv.Private(u.from, u.text)))
	}
	h.run(t, sink)
	h.srv.WaitFor(t, "every update confirmed", 10*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > ids[4] })

	sink.mu2.Lock()
	defer sink.mu2.Unlock()
	if sink.alone {
		t.Error("alice's first message was handed over alone: the chats of a batch are handled one after another")
	}
	// Alice's messages once each, in order (the batch read again after
	// bob's failure brings them as duplicates the fake sink would record:
	// the gateway's queue drops those by message id).
	if a := sink.order["42"]; len(a) < 3 || a[0] != "a1" || a[1] != "a2" || a[2] != "a3" {
		t.Fatalf("alice's messages in the order %v; want a1 a2 a3 first", a)
	}
	if b := sink.order["43"]; len(b) != 2 || b[0] != "b1" || b[1] != "b2" {
		t.Fatalf("bob's messages %v; want b1 then b2 (b1 accepted after its failure, b2 not before it)", b)
	}
	// The first getUpdates after the failed batch confirmed nothing from
	// bob's failed update on.
	var offsets []int64
	for _, c := range h.srv.Calls("getUpdates") {
		o, _ := strconv.ParseInt(c.Params["offset"], 10, 64)
		offsets = append(offsets, o)
	}
	for _, o := range offsets {
		if o > ids[2] && o <= ids[4] {
			t.Fatalf("getUpdates offsets %v: %d confirms bob's b1 (update %d) before it was accepted", offsets, o, ids[2])
		}
	}
}
