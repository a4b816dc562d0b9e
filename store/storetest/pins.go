package storetest

import (
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testSessionPins: a /model choice outlives its session's expiry (as it
// outlives /new), and a chat's new thread starts with the chat's pins.
func testSessionPins(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now, SessionTTL: time.Hour})
	chat := conv("pins")
	s1, err := db.ActiveSession(ctx, chat)
	check(t, "active session", err)
	check(t, "pins", db.SetPins(ctx, s1.ID, "fake/big", "p1"))

	clock.Advance(2 * time.Hour)
	s2, err := db.ActiveSession(ctx, chat)
	check(t, "session after the TTL", err)
	if s2.ID == s1.ID || s2.ModelPin != "fake/big" || s2.ProfilePin != "p1" {
		t.Fatalf("after the TTL: session %d pinned %q/%q; want a new session (not %d) keeping fake/big/p1", s2.ID, s2.ModelPin, s2.ProfilePin, s1.ID)
	}
	if again, err := db.Session(ctx, s2.ID); err != nil || again.ModelPin != "fake/big" {
		t.Fatalf("stored session %+v, %v; want fake/big pinned", again, err)
	}

	// The sweeper deleting the expired session first keeps them too.
	clock.Advance(2 * time.Hour)
	if n, err := db.ExpireSessions(ctx); err != nil || n == 0 {
		t.Fatalf("expire = %d, %v; want the idle session", n, err)
	}
	s3, err := db.ActiveSession(ctx, chat)
	check(t, "session after the sweep", err)
	if s3.ID == s2.ID || s3.ModelPin != "fake/big" || s3.ProfilePin != "p1" {
		t.Fatalf("after the sweep: session %d pinned %q/%q; want a new session (not %d) keeping fake/big/p1", s3.ID, s3.ModelPin, s3.ProfilePin, s2.ID)
	}
	if n, err := db.MessageCount(ctx, s3.ID); err != nil || n != 0 {
		t.Fatalf("the new session has %d messages (%v); want none", n, err)
	}

	thread := core.ConversationKey{Channel: chat.Channel, Chat: chat.Chat, Thread: "t1"}
	st, err := db.ActiveSession(ctx, thread)
	check(t, "thread session", err)
	if st.ModelPin != "fake/big" || st.ProfilePin != "p1" {
		t.Fatalf("a new thread of the chat pinned %q/%q; want the chat's fake/big/p1", st.ModelPin, st.ProfilePin)
	}
	other := core.ConversationKey{Channel: chat.Channel, Chat: "pins-other", Thread: "t1"}
	so, err := db.ActiveSession(ctx, other)
	check(t, "thread of another chat", err)
	if so.ModelPin != "" || so.ProfilePin != "" {
		t.Fatalf("a thread of a chat without a session pinned %q/%q; want none", so.ModelPin, so.ProfilePin)
	}
}

// testLatestThread: the thread of a chat where the bot last answered a
// user, from the usage ledger; other users, other chats (even one whose
// id begins with this one's) and the chat's top level do not count.
func testLatestThread(t *testing.T, e Engine) {
	clock := NewClock()
	db := e.open(t, store.Options{Now: clock.Now})
	chat := core.ConversationKey{Channel: "slack", Chat: "C1"}
	got, err := db.LatestThread(ctx, chat, "alice")
	if err != nil || got != "" {
		t.Fatalf("no answers yet: %q, %v; want none", got, err)
	}
	use := func(conv, user string) {
		t.Helper()
		clock.Advance(time.Second)
		check(t, "usage", db.AddUsage(ctx, core.UsageRecord{At: clock.Now(), Conversation: conv, UserID: user, Model: "fake/small", Purpose: "chat"}))
	}
	use("slack:C1:100.1", "alice")
	use("slack:C1:200.2", "alice")
	use("slack:C1:300.3", "bob")
	use("slack:C1", "alice")
	use("slack:C12:400.4", "alice")
	use("telegram:C1:500.5", "alice")
	for user, want := range map[string]string{"alice": "200.2", "bob": "300.3", "carol": ""} {
		got, err := db.LatestThread(ctx, core.ConversationKey{Channel: "slack", Chat: "C1", Thread: "ignored"}, user)
		if err != nil || got != want {
			t.Errorf("latest thread of %s in C1 = %q, %v; want %q", user, got, err, want)
		}
	}
}
