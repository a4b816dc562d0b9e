package discord_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// idle is a replica whose workers are all busy elsewhere: it commits
// what its channel receives and never claims an item.
type idle struct{ *store.DB }

func (idle) Claim(context.Context, int, time.Time) ([]core.QueueItem, time.Time, error) {
	return nil, time.Time{}, nil
}

// replica runs a gateway with a Discord channel against srv on the
// PostgreSQL at dsn until the test ends; an idle one never claims.
func replica(t *testing.T, srv *discordtest.Server, dsn string, claims bool) (*store.DB, *discord.Bot) {
	t.Helper()
	logs := &syncBuffer{}
	bot, err := discord.New(options(t, srv, logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, t.TempDir(), store.Options{Postgres: &store.Postgres{DSN: dsn}, LeaseTTL: 5 * time.Second,
		SealKey: bytes.Repeat([]byte{5}, store.SealKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	var st core.Store = db
	if !claims {
		st = idle{db}
	}
	agent := &echoAgent{}
	gw := gateway.New(gateway.Options{Store: st, Agent: agent, Signals: &signals{}, Workers: 4, LeaseTTL: 5 * time.Second,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	gw.AddChannel(bot)
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the gateway did not stop within 15s")
		}
		_ = bot.Close()
		db.Close()
		if strings.Contains(logs.String(), "itoken-") {
			t.Errorf("an interaction token reached the log:\n%s", logs.String())
		}
	})
	return db, bot
}

// TestReplicasCommandAnsweredInPlace: an application command reaches
// replica A, which defers it and keeps its token sealed in the database;
// replica B runs it (A never claims) and edits the deferred response into
// the answer instead of posting in the channel.
func TestReplicasCommandAnsweredInPlace(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := discordtest.New(t, token)
	a, _ := replica(t, srv, dsn, false) // A: the session that gets the events
	srv.WaitFor(t, "replica A connected", srv.Connected)
	srv.RefuseConnections(true) // B: no session of its own, REST only
	_, b := replica(t, srv, dsn, true)
	srv.WaitFor(t, "replica B's channel running", func() bool {
		err := b.Healthy()
		return err != nil && !strings.Contains(err.Error(), "not started")
	})
	guild := srv.Guild()
	channel := srv.TextChannel(guild)
	id := srv.Interaction(t, srv.User("alice"), guild, channel, "model", map[string]string{"model": "gpt-x"})
	srv.WaitFor(t, "the answer", func() bool { return len(srv.Sent()) >= 1 })
	s := srv.Sent()[0]
	if s.Via != "original" || s.Interaction != id || !strings.HasPrefix(s.Content, "Switching models is not available") {
		t.Fatalf("answer = %+v; want the deferred response edited into core's /model answer", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ok, err := a.OpenSealed(context.Background(), "discord:interaction:"+id)
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the used interaction token is still kept (%v, %v)", ok, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
