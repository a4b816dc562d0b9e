package discord_test

// The tests drive the channel through discordgo against discordtest (REST
// and a gateway websocket on 127.0.0.1), with the real gateway.Gateway and a
// real SQLite store and an instant fake agent in place of the LLM. Every
// test runs in parallel: discordgo waits a second when it closes a
// gateway connection.

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

const token = "MTEx.fake.SECRET-discord-token"

// echoAgent answers instantly; reply decides the text (default "echo: …").
type echoAgent struct {
	mu    sync.Mutex
	turns []core.Turn
	reply func(core.Turn) string
}

func (a *echoAgent) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	a.turns = append(a.turns, t)
	reply := a.reply
	a.mu.Unlock()
	text := "echo: " + t.Text
	if reply != nil {
		text = reply(t)
	}
	return core.Answer{
		Text:     text,
		Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}},
		Model:    "fake/echo", TaskType: "chat",
	}, nil
}

func (a *echoAgent) seen() []core.Turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]core.Turn(nil), a.turns...)
}

// signals records quality signals.
type signals struct {
	mu sync.Mutex
	s  []core.Signal
}

func (s *signals) RecordSignal(_ context.Context, sig core.Signal) error {
	s.mu.Lock()
	s.s = append(s.s, sig)
	s.mu.Unlock()
	return nil
}

func (s *signals) all() []core.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Signal(nil), s.s...)
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// quickSleep waits at most a few milliseconds: reconnect backoff and send
// retries go by at once.
func quickSleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(min(d, 5*time.Millisecond)):
		return nil
	}
}

// options is a channel's config and options against srv; every log line
// goes to logs and is checked for the token when the test ends.
func options(t *testing.T, srv *discordtest.Server, logs *syncBuffer) discord.Options {
	cfg := config.Default().Channels.Discord
	cfg.Enabled, cfg.Token, cfg.APIURL = true, config.Secret(srv.Token), srv.URL
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("channel log:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), "SECRET-discord") {
			t.Errorf("the bot token appears in the logs:\n%s", logs.String())
		}
	})
	return discord.Options{
		Config: cfg,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:  quickSleep,
	}
}

// rig is the fake Discord, the channel and a running gateway.
type rig struct {
	srv     *discordtest.Server
	bot     *discord.Bot
	gw      *gateway.Gateway
	db      *store.DB
	agent   *echoAgent
	signals *signals
	logs    *syncBuffer
	done    chan error // the gateway's Run result
	guild   string
	channel string
	alice   discordtest.User
}

// start runs the fake, the channel and a gateway until the test ends;
// edit changes the channel's config and options first, setup the fake.
func start(t *testing.T, edit func(*config.Discord, *discord.Options), setup func(*discordtest.Server)) *rig {
	t.Helper()
	return startWith(t, edit, setup, nil)
}

// startWith is start with the gateway's options changed by gw (when not
// nil) before it is built.
func startWith(t *testing.T, edit func(*config.Discord, *discord.Options), setup func(*discordtest.Server), gw func(*gateway.Options)) *rig {
	t.Helper()
	srv := discordtest.New(t, token)
	if setup != nil {
		setup(srv)
	}
	logs := &syncBuffer{}
	o := options(t, srv, logs)
	if edit != nil {
		edit(&o.Config, &o)
	}
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	agent := &echoAgent{}
	sig := &signals{}
	gwo := gateway.Options{Store: db, Agent: agent, Signals: sig, Workers: 8, Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	if gw != nil {
		gw(&gwo)
	}
	g := gateway.New(gwo)
	g.AddChannel(bot)
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the gateway did not stop within 15s")
		}
		if err := bot.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		db.Close()
	})
	guild := srv.Guild()
	return &rig{srv: srv, bot: bot, gw: g, db: db, agent: agent, signals: sig, logs: logs, done: done,
		guild: guild, channel: srv.TextChannel(guild), alice: srv.User("alice")}
}

// mention posts "<@bot> text" by alice in the rig's guild channel.
func (r *rig) mention(t *testing.T, text string) string {
	t.Helper()
	return r.srv.Message(t, discordtest.Msg{Channel: r.channel, Guild: r.guild, Author: r.alice,
		Content: discordtest.Mention(r.srv.Bot) + " " + text, Mentions: []discordtest.User{r.srv.Bot}})
}

// waitSent waits until n messages were sent and returns them.
func (r *rig) waitSent(t *testing.T, n int) []discordtest.Sent {
	t.Helper()
	r.srv.WaitFor(t, "sent messages", func() bool { return len(r.srv.Sent()) >= n })
	return r.srv.Sent()
}

// waitLog waits until the log holds s.
func (r *rig) waitLog(t *testing.T, s string) {
	t.Helper()
	r.srv.WaitFor(t, "the log line "+s, func() bool { return strings.Contains(r.logs.String(), s) })
}

// fakeSink records what the channel hands over, for tests without a
// gateway.
type fakeSink struct {
	mu       sync.Mutex
	accepted []core.Inbound
	edits    []core.Inbound
	reacts   []core.Reaction
	commands []core.CommandInfo
}

func (s *fakeSink) Accept(_ context.Context, in core.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = append(s.accepted, in)
	return nil
}

func (s *fakeSink) Edit(_ context.Context, in core.Inbound) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.edits = append(s.edits, in)
	return true, nil
}

func (s *fakeSink) edited() []core.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Inbound(nil), s.edits...)
}

func (s *fakeSink) React(_ context.Context, r core.Reaction) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reacts = append(s.reacts, r)
	return nil
}

func (s *fakeSink) Commands() []core.CommandInfo { return s.commands }

func (s *fakeSink) inbound() []core.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Inbound(nil), s.accepted...)
}

// sinkBot runs a bot of srv whose events go to a fakeSink, without a
// gateway.
func sinkBot(t *testing.T, srv *discordtest.Server) (*discord.Bot, *fakeSink) {
	t.Helper()
	bot, err := discord.New(options(t, srv, &syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{}
	runBot(t, bot, sink)
	return bot, sink
}

// runBot runs bot with sink until the test ends and returns Run's result.
func runBot(t *testing.T, bot *discord.Bot, sink core.Sink) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		done <- bot.Run(ctx, sink)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(15 * time.Second):
			t.Error("Run did not return within 15s of its context ending")
		}
		bot.Close()
	})
	return done
}
