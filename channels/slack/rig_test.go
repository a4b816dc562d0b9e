package slack_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/store"
)

// wait bounds every wait of these tests.
const wait = 20 * time.Second

// agent answers "echo: <text>" (or what answer returns) and records every
// turn it was asked.
type agent struct {
	mu     sync.Mutex
	turns  []core.Turn
	answer func(text string) string
}

func (a *agent) Answer(_ context.Context, t core.Turn) (core.Answer, error) {
	a.mu.Lock()
	a.turns = append(a.turns, t)
	answer := a.answer
	a.mu.Unlock()
	text := "echo: " + t.Text
	if answer != nil {
		text = answer(t.Text)
	}
	return core.Answer{Text: text, Model: "fake/model", TaskType: "chat",
		Messages: []core.ChatMessage{{Role: core.RoleUser, Content: t.Text}, {Role: core.RoleAssistant, Content: text}}}, nil
}

func (a *agent) texts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, t := range a.turns {
		out = append(out, t.Text)
	}
	return out
}

type signals struct {
	mu  sync.Mutex
	got []core.Signal
}

func (s *signals) RecordSignal(_ context.Context, sig core.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, sig)
	return nil
}

func (s *signals) all() []core.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.Signal(nil), s.got...)
}

// logBuf is a log sink safe for concurrent writes.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rig is a gateway over a real store with the Slack channel against a
// fake Slack.
type rig struct {
	srv     *slacktest.Server
	bot     *slack.Bot
	gw      *gateway.Gateway
	db      *store.DB
	agent   *agent
	signals *signals
	logs    *logBuf
	done    chan error
	stop    context.CancelFunc
}

// setup tunes a rig before it starts.
type setup struct {
	fake   slacktest.Options
	config func(*config.Slack)
	opts   func(*slack.Options)
	// gatewayOptions changes the gateway's options (its access rules).
	gatewayOptions func(*gateway.Options)
	// openDB opens the rig's database (default: SQLite in a temporary
	// directory); replicas open one PostgreSQL.
	openDB func() (*store.DB, error)
	// wrap is the store the gateway uses (default: the database).
	wrap func(*store.DB) core.Store
	// beforeRun changes the gateway before it runs (its commands).
	beforeRun func(*gateway.Gateway)
}

func newRig(t testing.TB, s setup) *rig {
	t.Helper()
	if s.fake.AckTimeout == 0 {
		s.fake.AckTimeout = 500 * time.Millisecond
	}
	srv := slacktest.New(t, botToken, appToken, s.fake)
	r := newRigOn(t, srv, s)
	srv.WaitConnected(t, 1, wait)
	return r
}

// newRigOn starts a rig against an existing fake (a second gateway, as
// after a restart).
func newRigOn(t testing.TB, srv *slacktest.Server, s setup) *rig {
	t.Helper()
	cfg := config.Default().Channels.Slack
	cfg.Enabled, cfg.BotToken, cfg.AppToken, cfg.APIURL = true, botToken, appToken, srv.URL
	if s.config != nil {
		s.config(&cfg)
	}
	logs := &logBuf{}
	o := slack.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), SendGap: -1}
	if s.opts != nil {
		s.opts(&o)
	}
	bot, err := slack.New(o)
	if err != nil {
		t.Fatal(err)
	}
	open := s.openDB
	if open == nil {
		dir := t.TempDir()
		open = func() (*store.DB, error) { return store.Open(context.Background(), dir, store.Options{}) }
	}
	db, err := open()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{srv: srv, bot: bot, db: db, agent: &agent{}, signals: &signals{}, logs: logs, done: make(chan error, 1)}
	var st core.Store = db
	if s.wrap != nil {
		st = s.wrap(db)
	}
	gopts := gateway.Options{Store: st, Agent: r.agent, Signals: r.signals, Workers: 4,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	if s.gatewayOptions != nil {
		s.gatewayOptions(&gopts)
	}
	r.gw = gateway.New(gopts)
	r.gw.AddChannel(bot)
	if s.beforeRun != nil {
		s.beforeRun(r.gw)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- r.gw.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		r.shutdown(t)
		db.Close()
		for _, secret := range []string{botToken, appToken, "SECRET"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("a secret reached the log:\n%s", logs.String())
			}
		}
	})
	return r
}

func (r *rig) shutdown(t testing.TB) {
	t.Helper()
	if r.stop == nil {
		return
	}
	r.stop()
	r.stop = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("gateway: %v", err)
		}
	case <-time.After(wait):
		t.Errorf("the gateway did not stop within %s", wait)
	}
	if err := r.bot.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// rows counts the queue rows.
func (r *rig) rows(t *testing.T) int {
	t.Helper()
	counts, err := r.db.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func (r *rig) doneRows(t *testing.T) int {
	t.Helper()
	counts, err := r.db.QueueCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return counts[core.StatusDone]
}

// eventually polls cond until it holds or the wait ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// calm gives a wrong extra reply the time to show up.
func calm() { time.Sleep(300 * time.Millisecond) }

func describePosts(ps []slacktest.Post) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n  %s thread=%q %q", p.Channel, p.ThreadTS, p.Text)
	}
	return b.String()
}
