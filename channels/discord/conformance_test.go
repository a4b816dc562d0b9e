package discord_test

import (
	"context"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/channels/channeltest"
	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// platform runs the channel against discordtest. Its checks run in
// parallel: each one closes a gateway connection, which takes discordgo a
// second.
type platform struct {
	parallel sync.Map // *testing.T → already parallel
}

type instance struct {
	srv *discordtest.Server
	bot *discord.Bot
}

func (p *platform) Start(t *testing.T, allowUsers []string) channeltest.Instance {
	if _, again := p.parallel.LoadOrStore(t, true); !again {
		t.Parallel()
	}
	srv := discordtest.New(t, token)
	// The same names get the same ids in every fake (allow_users of one
	// instance is filled from another's ids).
	srv.User("alice")
	srv.User("bob")
	o := options(t, srv, &syncBuffer{})
	o.Config.AllowUsers = allowUsers
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{srv: srv, bot: bot}
}

func (i *instance) Channel() core.Channel { return i.bot }

// Caps: the gateway has no acknowledgements (Discord sends an event once
// and replays only on resume).
func (i *instance) Caps() channeltest.Caps {
	return channeltest.Caps{Redeliver: true, Reactions: true, Users: true}
}

func (i *instance) UserID(name string) string { return i.srv.User(name).ID }
func (i *instance) Limit() int                { return textfmt.DiscordLimit }

// Message is a direct message from user from.
func (i *instance) Message(t *testing.T, from, text string) channeltest.Event {
	u := i.srv.User(from)
	m := discordtest.Msg{Channel: i.srv.DM(u), Author: u, Content: text}
	m.ID = i.srv.Message(t, m)
	return m
}

// Redeliver dispatches the same message again, as a replay after a
// resume does.
func (i *instance) Redeliver(t *testing.T, ev channeltest.Event) {
	i.srv.Message(t, ev.(discordtest.Msg))
}

func (i *instance) Acked(*testing.T, channeltest.Event) bool { return false }

func (i *instance) React(t *testing.T, from, messageID, emoji string) {
	u := i.srv.User(from)
	i.srv.React(t, u, "", i.srv.DM(u), messageID, emoji, true)
}

func TestConformance(t *testing.T) {
	channeltest.Run(t, &platform{}, channeltest.Options{OpenStore: func(t *testing.T) channeltest.Store {
		db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}})
}
