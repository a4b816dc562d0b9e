package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// outOfReachDB says a connection refused is the database out of reach
// (store.DB.Unreachable on PostgreSQL).
type outOfReachDB struct{ *store.DB }

func (outOfReachDB) Unreachable(err error) bool { return errors.Is(err, errOutOfReach) }

// pairingsDown is a pairing store whose database is out of reach.
type pairingsDown struct{ core.PairingStore }

func (pairingsDown) Pairing(context.Context, string, string) (*core.Pairing, error) {
	return nil, errOutOfReach
}

// TestAcceptSaysTheDatabaseIsOutOfReachBeforeTheQueue: on a channel in
// pairing mode (Discord's, Slack's and Telegram's default) a message of a
// user not listed is checked against the pairings in the database before
// it is queued. When that read meets the database out of reach, Accept
// says so as it does for the enqueue (KindUnavailable, named), so that
// Discord waits for the database instead of dropping the message; it
// returned the bare driver error, and Discord dropped it after 3 s.
func TestAcceptSaysTheDatabaseIsOutOfReachBeforeTheQueue(t *testing.T) {
	db := openDB(t, store.Options{})
	r := runOn(t, db, gateway.Options{Store: outOfReachDB{db}, Agent: &fakeAgent{}, Pairings: pairingsDown{db},
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Users: []string{"friend"}}}})
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "s"}, MessageID: "1", UserID: "stranger", Text: "hello", Private: true}
	var err error
	for i := 0; ; i++ {
		err = r.g.Accept(context.Background(), in)
		if !errors.Is(err, gateway.ErrNotAccepting) || i > 1000 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if k := core.ErrorKind(err); k != core.KindUnavailable || !errors.Is(err, errOutOfReach) {
		t.Fatalf("Accept while the pairings cannot be read: %v (kind %v); want %v wrapping the driver's error", err, k, core.KindUnavailable)
	}
}

// TestReactSaysTheDatabaseIsOutOfReach: a reaction that meets the
// database out of reach (its access check, as a message's) is refused as
// KindUnavailable, named, so Discord waits for the database as it does
// for a message; it returned the bare driver error, and Discord dropped
// the reaction after 3 s.
func TestReactSaysTheDatabaseIsOutOfReach(t *testing.T) {
	db := openDB(t, store.Options{})
	r := runOn(t, db, gateway.Options{Store: outOfReachDB{db}, Agent: &fakeAgent{}, Pairings: pairingsDown{db},
		Access: map[string]core.AccessPolicy{"fake": {Mode: core.AccessPairing, Users: []string{"friend"}}}})
	re := core.Reaction{Conversation: core.ConversationKey{Channel: "fake", Chat: "s"}, MessageID: "9", UserID: "stranger", EventID: "e1", Emoji: "👎", Added: true}
	var err error
	for i := 0; ; i++ {
		err = r.g.React(context.Background(), re)
		if !errors.Is(err, gateway.ErrNotAccepting) || i > 1000 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if k := core.ErrorKind(err); k != core.KindUnavailable || !errors.Is(err, errOutOfReach) {
		t.Fatalf("React while the pairings cannot be read: %v (kind %v); want %v wrapping the driver's error", err, k, core.KindUnavailable)
	}
}
