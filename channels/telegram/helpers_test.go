package telegram

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

const testToken = "123456:SECRET-token-never-logged"

// fakeSink records what the channel hands to the gateway.
type fakeSink struct {
	mu       sync.Mutex
	accepted []core.Inbound
	edits    []core.Inbound
	reacts   []core.Reaction
	failNext int // Accept fails this many times first
	changed  chan struct{}
}

func newFakeSink() *fakeSink { return &fakeSink{changed: make(chan struct{}, 100)} }

func (s *fakeSink) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *fakeSink) Accept(_ context.Context, in core.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.poke()
	if s.failNext > 0 {
		s.failNext--
		return errors.New("database is locked")
	}
	s.accepted = append(s.accepted, in)
	return nil
}

func (s *fakeSink) Edit(_ context.Context, in core.Inbound) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.poke()
	s.edits = append(s.edits, in)
	return true, nil
}

func (s *fakeSink) React(_ context.Context, r core.Reaction) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.poke()
	s.reacts = append(s.reacts, r)
	return nil
}

func (s *fakeSink) Commands() []core.CommandInfo {
	return []core.CommandInfo{
		{Name: "model", Usage: "/model", Description: "Show or pick the model"},
		{Name: "new", Usage: "/new", Description: "Start a fresh conversation"},
		{Name: "Bad-Name!", Usage: "/x", Description: "not a Telegram command name"},
	}
}

// waitFor polls cond under the sink's lock until it holds.
func (s *fakeSink) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
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

// sleeps records the waits the bot asked for, taking only a token pause.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(min(d, 2*time.Millisecond)):
		return nil
	}
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

type harness struct {
	srv    *telegramtest.Server
	bot    *Bot
	logs   *syncBuffer
	sleeps *sleeps
}

// newHarness builds a bot against a fresh fake server; edit changes the
// config or options first. Every log line is checked for the token.
func newHarness(t *testing.T, edit func(*config.Telegram, *Options)) *harness {
	t.Helper()
	srv := telegramtest.New(t, testToken)
	logs := &syncBuffer{}
	sl := &sleeps{}
	cfg := config.Default().Channels.Telegram
	cfg.Enabled, cfg.Token, cfg.APIURL = true, config.Secret(testToken), srv.URL
	o := Options{
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:       sl.sleep,
		PollTimeout: time.Second,
		SendGap:     -1,
	}
	if edit != nil {
		edit(&cfg, &o)
	}
	o.Config = cfg
	b, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), "SECRET-token") {
			t.Errorf("the bot token appears in the logs:\n%s", logs.String())
		}
	})
	return &harness{srv: srv, bot: b, logs: logs, sleeps: sl}
}

// run starts the bot until the test ends and returns Run's result channel.
func (h *harness) run(t *testing.T, sink core.Sink) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.bot.Run(ctx, sink) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	return done
}

// runWebhook runs a bot in webhook mode (secret "hook-secret") into a
// fake sink and returns the address its webhook listens on.
func runWebhook(t *testing.T) (*harness, *fakeSink, net.Addr) {
	t.Helper()
	h := newHarness(t, func(c *config.Telegram, _ *Options) {
		c.Mode = config.ModeWebhook
		c.Webhook = config.TelegramWebhook{Listen: "127.0.0.1:0", URL: "https://bot.example.com/telegram", Secret: "hook-secret"}
	})
	sink := newFakeSink()
	h.run(t, sink)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := h.bot.WebhookAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h, sink, addr
}
