package discord_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// shardReplica is one replica of a sharded bot: a gateway, its Discord
// channel running shards under leases of the shared PostgreSQL.
type shardReplica struct {
	db   *store.DB
	el   *lease.Elector
	stop func() // cancels the replica and waits for it
}

func startShardReplica(t *testing.T, srv *discordtest.Server, dsn string, shards string) *shardReplica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, t.TempDir(), store.Options{Postgres: &store.Postgres{DSN: dsn}, LeaseTTL: 5 * time.Second,
		SealKey: bytes.Repeat([]byte{5}, store.SealKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	el := lease.New(db, lease.Options{Holder: db.Holder(), TTL: 3 * time.Second, Poll: 200 * time.Millisecond})
	logs := &syncBuffer{}
	o := options(t, srv, logs)
	o.Config.Shards = "2"
	if shards != "" {
		o.Config.Shards = config.DiscordShards(shards)
	}
	o.HoldShard = func(ctx context.Context, name string, work func(context.Context, discord.ShardLease) error) error {
		return el.Hold(ctx, name, func(ctx context.Context, l *lease.Lease) error { return work(ctx, l) })
	}
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{Store: db, Agent: &echoAgent{}, Signals: &signals{}, Workers: 4, LeaseTTL: 5 * time.Second,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	gw.AddChannel(bot)
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx, 5*time.Second) }()
	stopped := false
	r := &shardReplica{db: db, el: el}
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the gateway did not stop within 15s")
		}
		_ = bot.Close()
		db.Close()
	}
	t.Cleanup(r.stop)
	return r
}

func (r *shardReplica) holds(name string) bool { return slices.Contains(r.el.HeldNames(), name) }

// TestShardsTwoReplicas: two shards on two replicas of one PostgreSQL.
// Each shard has one session, identified with its [shard, 2]; a guild
// message on shard 1 and a DM (shard 0) are each answered once; the
// shard-1 holder stopped, the other replica takes shard 1's lease and
// RESUMEs its session from the lease's data, so a message sent while no
// one was connected is answered too.
func TestShardsTwoReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := discordtest.New(t, token)
	srv.SetShards(2, 1)
	reps := []*shardReplica{startShardReplica(t, srv, dsn, ""), startShardReplica(t, srv, dsn, "")}
	srv.WaitFor(t, "both shards connected", srv.Connected)
	shard1 := discord.ShardLeaseName(srv.AppID, 1)

	for _, id := range srv.Identifies() {
		if id.Shard[1] != 2 {
			t.Fatalf("IDENTIFY named shard %v; want [n, 2]", id.Shard)
		}
	}
	alice := srv.User("alice")
	guild := srv.GuildOnShard(1)
	if srv.ShardOf(guild) != 1 {
		t.Fatalf("guild %s is on shard %d", guild, srv.ShardOf(guild))
	}
	channel := srv.TextChannel(guild)
	dm := srv.DM(alice)
	srv.Message(t, discordtest.Msg{Channel: channel, Guild: guild, Author: alice, Content: discordtest.Mention(srv.Bot) + " on shard one", Mentions: []discordtest.User{srv.Bot}})
	srv.Message(t, discordtest.Msg{Channel: dm, Author: alice, Content: "in a DM"})
	answers := func(ch string) int {
		n := 0
		for _, s := range srv.Sent() {
			if s.ChannelID == ch {
				n++
			}
		}
		return n
	}
	srv.WaitFor(t, "both answered", func() bool { return answers(channel) >= 1 && answers(dm) >= 1 })

	var holder, other *shardReplica
	srv.WaitFor(t, "a holder of shard 1", func() bool {
		for i, r := range reps {
			if r.holds(shard1) {
				holder, other = r, reps[1-i]
				return true
			}
		}
		return false
	})
	session, seq := srv.ShardSession(1)
	// The holder keeps the session's progress in the lease.
	srv.WaitFor(t, "shard 1's session in its lease", func() bool {
		raw, err := holder.db.LeaseData(context.Background(), shard1)
		var st struct {
			SessionID string `json:"session_id"`
			Seq       int64  `json:"seq"`
		}
		return err == nil && json.Unmarshal(raw, &st) == nil && st.SessionID == session && st.Seq == seq
	})
	identified := len(srv.Identifies())
	resumed := srv.Resumes()

	holder.stop()
	// A message while shard 1 has no connection: Discord keeps it for
	// the session.
	srv.DispatchOffline(true)
	srv.Message(t, discordtest.Msg{Channel: channel, Guild: guild, Author: alice, Content: discordtest.Mention(srv.Bot) + " in the gap", Mentions: []discordtest.User{srv.Bot}})
	srv.DispatchOffline(false)

	srv.WaitFor(t, "shard 1 taken over", func() bool { return other.holds(shard1) && srv.ShardConnected(1) })
	srv.WaitFor(t, "the message of the gap answered", func() bool { return answers(channel) >= 2 })
	var found bool
	for _, r := range srv.ResumeLog()[resumed:] {
		if r.Shard == 1 && r.Session == session && r.Seq == seq {
			found = true
		}
	}
	if !found {
		t.Fatalf("no RESUME of shard 1's session %s at seq %d; resumes: %+v", session, seq, srv.ResumeLog())
	}
	for _, id := range srv.Identifies()[identified:] {
		if id.Shard[0] == 1 {
			t.Errorf("shard 1 identified afresh after the takeover: %+v", id)
		}
	}
	// Each message answered once, in its own channel.
	time.Sleep(500 * time.Millisecond)
	if a, d := answers(channel), answers(dm); a != 2 || d != 1 {
		t.Fatalf("answers: guild channel %d (want 2), DM %d (want 1): %+v", a, d, srv.Sent())
	}
	for _, s := range srv.Sent() {
		if s.ChannelID == channel && !strings.Contains(s.Content, "shard one") && !strings.Contains(s.Content, "gap") {
			t.Errorf("answer %q in the guild channel", s.Content)
		}
	}
}

// memLease is a shard lease held for good, its data in memory.
type memLease struct {
	mu   sync.Mutex
	data []byte
}

func (l *memLease) Data(context.Context) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.data, nil
}

func (l *memLease) SetData(_ context.Context, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append([]byte(nil), data...)
	return nil
}

// TestANewSessionIsInTheLeaseBeforeItsEvents: the session a shard's
// holder identified is in the lease before any of its events is taken
// in, not up to a second later: a holder killed (SIGKILL) right after it
// connected leaves its successor a session to resume, so what Discord
// sends meanwhile is replayed, not lost to a fresh IDENTIFY.
func TestANewSessionIsInTheLeaseBeforeItsEvents(t *testing.T) {
	l := &memLease{}
	r := start(t, func(_ *config.Discord, o *discord.Options) {
		o.HoldShard = func(ctx context.Context, _ string, work func(context.Context, discord.ShardLease) error) error {
			return work(ctx, l)
		}
	}, nil)
	r.srv.WaitFor(t, "the shard connected", r.srv.Connected)
	r.mention(t, "hello")
	r.waitSent(t, 1)
	session, _ := r.srv.ShardSession(0)
	raw, _ := l.Data(context.Background())
	var st struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal(raw, &st) != nil || st.SessionID != session {
		t.Fatalf("the lease holds %q once the first message is answered; want session %s in it", raw, session)
	}
}
