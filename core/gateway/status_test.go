package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	coreclock "github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// replicaChannel is fakeChannel as one replica of several sees it: its
// last event is what this replica itself received (core.HealthReporter).
type replicaChannel struct {
	*fakeChannel
	last time.Time
}

func (c *replicaChannel) Healthy() error       { return nil }
func (c *replicaChannel) LastEvent() time.Time { return c.last }

// TestStatusLastUpdateDescribesTheBotOnAnyReplica: /status answered by a
// replica that did not receive the platform's updates itself (replicas
// on one database: another holds Telegram's poller, or took the
// webhook's request; the command reached this one through the shared
// queue) still says when the bot last got an update — at the latest the
// command itself —, not nothing, nor what this replica heard long ago.
func TestStatusLastUpdateDescribesTheBotOnAnyReplica(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		last time.Time // this replica's own last event
		want string
	}{
		{"a replica that never held the poller", time.Time{}, "fake: last update 0s ago"},
		{"a replica that held it ten minutes ago", start.Add(-10 * time.Minute), "fake: last update 0s ago"},
		{"the replica that received the command", start, "fake: last update 0s ago"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := coreclock.NewFake(start)
			db := openDB(t, store.Options{Now: c.Now})
			ch := &replicaChannel{fakeChannel: &fakeChannel{notify: make(chan string, 100)}, last: tc.last}
			r := runWith(t, db, gateway.Options{Store: db, Agent: &fakeAgent{}, Now: c.Now}, ch, ch.fakeChannel)
			r.acceptIn(core.Inbound{Conversation: core.ConversationKey{Channel: "fake", Chat: "c"}, MessageID: "1", UserID: "u", Text: "/status", ReceivedAt: start})
			got := r.next()
			if !strings.Contains(got, "Model:") || !strings.HasSuffix(got, "\n"+tc.want) {
				t.Fatalf("/status answered %q; want its last line %q", got, tc.want)
			}
		})
	}
}
