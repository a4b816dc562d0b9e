package telegram_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/channeltest"
	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// platform runs the channel against telegramtest.
type platform struct{}

type instance struct {
	srv *telegramtest.Server
	bot *telegram.Bot
}

type update struct {
	id int64
	u  models.Update
}

var users = map[string]*models.User{
	"alice": telegramtest.User(42, "alice"),
	"bob":   telegramtest.User(43, "bob"),
}

func (platform) Start(t *testing.T, allowUsers []string) channeltest.Instance {
	srv := telegramtest.New(t, token)
	cfg := config.Default().Channels.Telegram
	cfg.Enabled, cfg.Token, cfg.APIURL, cfg.AllowUsers = true, config.Secret(token), srv.URL, allowUsers
	b, err := telegram.New(telegram.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{srv: srv, bot: b}
}

func (i *instance) Channel() core.Channel { return i.bot }
func (i *instance) Caps() channeltest.Caps {
	return channeltest.Caps{Acks: true, Redeliver: true, Reactions: true, Users: true}
}
func (i *instance) UserID(name string) string { return strconv.FormatInt(users[name].ID, 10) }
func (i *instance) Limit() int                { return 4096 }

func (i *instance) Message(t *testing.T, from, text string) channeltest.Event {
	u := i.srv.Private(users[from], text)
	return update{id: i.srv.AddUpdate(u), u: u}
}

// Redeliver hands the same message over in a second update, as Telegram
// does when a getUpdates answer was lost.
func (i *instance) Redeliver(t *testing.T, ev channeltest.Event) {
	i.srv.AddUpdate(ev.(update).u)
}

func (i *instance) Acked(t *testing.T, ev channeltest.Event) bool {
	return i.srv.Confirmed() > ev.(update).id
}

func (i *instance) React(t *testing.T, from, messageID, emoji string) {
	chat, msg, ok := strings.Cut(messageID, ":")
	c, err1 := strconv.ParseInt(chat, 10, 64)
	m, err2 := strconv.Atoi(msg)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("platform message id %q is not <chat>:<message>", messageID)
	}
	i.srv.AddUpdate(telegramtest.Reaction(c, models.ChatTypePrivate, m, users[from], nil, []string{emoji}))
}

func TestConformance(t *testing.T) {
	channeltest.Run(t, platform{}, channeltest.Options{OpenStore: func(t *testing.T) channeltest.Store {
		db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}})
}
