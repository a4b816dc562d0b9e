package slack_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/channeltest"
	"github.com/opentalon/opentalon/channels/slack"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

const (
	botToken = "xoxb-1-SECRET-bot-token-never-logged"
	appToken = "xapp-1-SECRET-app-token-never-logged"
)

// platform runs the channel in Socket Mode against slacktest.
type platform struct{}

type instance struct {
	srv *slacktest.Server
	bot *slack.Bot
}

func (platform) Start(t *testing.T, allowUsers []string) channeltest.Instance {
	// Slack delivers an unacknowledged envelope again after a few
	// seconds; the fake does it sooner.
	srv := slacktest.New(t, botToken, appToken, slacktest.Options{AckTimeout: 300 * time.Millisecond})
	cfg := config.Default().Channels.Slack
	cfg.Enabled, cfg.BotToken, cfg.AppToken, cfg.APIURL, cfg.AllowUsers = true, botToken, appToken, srv.URL, allowUsers
	b, err := slack.New(slack.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{srv: srv, bot: b}
}

func (i *instance) Channel() core.Channel { return i.bot }
func (i *instance) Caps() channeltest.Caps {
	return channeltest.Caps{Acks: true, Redeliver: true, Reactions: true, Users: true}
}
func (i *instance) UserID(name string) string { return slacktest.UserID(name) }
func (i *instance) Limit() int                { return 4000 }

func (i *instance) Message(t *testing.T, from, text string) channeltest.Event {
	return i.srv.Deliver(i.srv.DM(from, text, ""))
}

// Redeliver sends the same event again without a retry marker, as Slack
// may on a second Socket Mode connection.
func (i *instance) Redeliver(t *testing.T, ev channeltest.Event) {
	i.srv.Redeliver(ev.(slacktest.Envelope), 0)
}

func (i *instance) Acked(t *testing.T, ev channeltest.Event) bool {
	return i.srv.Acked(ev.(slacktest.Envelope))
}

// slackNames spells the suite's emoji as Slack names them.
var slackNames = map[string]string{"👍": "+1", "👎": "-1"}

func (i *instance) React(t *testing.T, from, messageID, emoji string) {
	channel, ts, ok := strings.Cut(messageID, ":")
	if !ok {
		t.Fatalf("platform message id %q is not <channel>:<ts>", messageID)
	}
	i.srv.Deliver(i.srv.Reaction(from, channel, ts, slackNames[emoji], true))
}

func openStore(t *testing.T) channeltest.Store {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	channeltest.Run(t, platform{}, channeltest.Options{OpenStore: openStore})
}
