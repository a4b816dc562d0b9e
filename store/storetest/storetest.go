package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// Engine opens the databases of one engine.
type Engine struct {
	// Name is "sqlite" or "postgres".
	Name string
	// New creates a fresh, empty database for t and returns a function
	// that opens a handle on it with the given options; each call opens
	// another handle on the same database (another replica). Handles are
	// closed when t ends.
	New func(t *testing.T) func(o store.Options) *store.DB
}

// open is New then one handle.
func (e Engine) open(t *testing.T, o store.Options) *store.DB {
	t.Helper()
	return e.New(t)(o)
}

// Run checks the store contract on e.
func Run(t *testing.T, e Engine) {
	t.Run("Queue", func(t *testing.T) { testQueue(t, e) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, e) })
	t.Run("SingletonLeases", func(t *testing.T) { testSingletonLeases(t, e) })
	t.Run("Cluster", func(t *testing.T) { testCluster(t, e) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, e) })
	t.Run("SessionPins", func(t *testing.T) { testSessionPins(t, e) })
	t.Run("IdleSession", func(t *testing.T) { testIdleSession(t, e) })
	t.Run("NoIdleAfterNew", func(t *testing.T) { testNoIdleAfterNew(t, e) })
	t.Run("LatestThread", func(t *testing.T) { testLatestThread(t, e) })
	t.Run("Replies", func(t *testing.T) { testReplies(t, e) })
	t.Run("Memories", func(t *testing.T) { testMemories(t, e) })
	t.Run("MemoryPlaces", func(t *testing.T) { testMemoryPlaces(t, e) })
	t.Run("PluginState", func(t *testing.T) { testPluginState(t, e) })
	t.Run("LuaKV", func(t *testing.T) { testLuaKV(t, e) })
	t.Run("Routing", func(t *testing.T) { testRouting(t, e) })
	t.Run("Usage", func(t *testing.T) { testUsage(t, e) })
	t.Run("Folded", func(t *testing.T) { testFolded(t, e) })
	t.Run("Schedules", func(t *testing.T) { testSchedules(t, e) })
	t.Run("Pairings", func(t *testing.T) { testPairings(t, e) })
	t.Run("Settings", func(t *testing.T) { testSettings(t, e) })
	t.Run("Media", func(t *testing.T) { testMedia(t, e) })
	t.Run("Operations", func(t *testing.T) { testOperations(t, e) })
	t.Run("Sealed", func(t *testing.T) { testSealed(t, e) })
	t.Run("Replied", func(t *testing.T) { testReplied(t, e) })
	t.Run("MediaShared", func(t *testing.T) { testMediaShared(t, e) })
	t.Run("TextIsStorable", func(t *testing.T) { testTextIsStorable(t, e) })
	t.Run("QueueView", func(t *testing.T) { testQueueView(t, e) })
}

// Clock is a settable clock for Options.Now, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at a fixed instant (milliseconds: the store keeps those).
func NewClock() *Clock { return &Clock{t: time.UnixMilli(1_780_000_000_000)} }

// Now returns the current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var ctx = context.Background()

// conv is a conversation of the test platform.
func conv(chat string) core.ConversationKey {
	return core.ConversationKey{Channel: "telegram", Chat: chat}
}

// msg is a queue item of a message with text in c, deduplicated by id.
func msg(c core.ConversationKey, id, text string) core.QueueItem {
	in := core.Inbound{Conversation: c, MessageID: id, Text: text, UserID: "u1"}
	return core.QueueItem{Kind: core.EventMessage, Conversation: c, DedupeKey: c.Channel + ":" + c.Chat + ":m:" + id, Message: &in}
}

// mustEnqueue enqueues it and returns its id.
func mustEnqueue(t *testing.T, q core.QueueStore, it core.QueueItem) int64 {
	t.Helper()
	id, dup, err := q.Enqueue(ctx, it)
	if err != nil || dup || id == 0 {
		t.Fatalf("enqueue %s: id %d, dup %v, %v", it.DedupeKey, id, dup, err)
	}
	return id
}

// claim claims up to n items at now and returns them.
func claim(t *testing.T, q core.QueueStore, n int, now time.Time) []core.QueueItem {
	t.Helper()
	items, _, err := q.Claim(ctx, n, now)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return items
}

// texts lists the message texts of items.
func texts(items []core.QueueItem) string {
	s := ""
	for i, it := range items {
		if i > 0 {
			s += ","
		}
		if it.Message != nil {
			s += it.Message.Text
		} else {
			s += fmt.Sprintf("#%d", it.ID)
		}
	}
	return s
}

func check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
