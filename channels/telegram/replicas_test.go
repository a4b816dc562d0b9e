package telegram_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// pollerReplica is one replica: a gateway over the shared PostgreSQL with
// the Telegram channel polling under the bot's lease.
type pollerReplica struct {
	bot  *telegram.Bot
	logs *logBuf
	db   *store.DB
	el   *lease.Elector
	stop context.CancelFunc
	done chan error
}

func startPollerReplica(t *testing.T, srv *telegramtest.Server, dsn, holder string) *pollerReplica {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{Postgres: &store.Postgres{DSN: dsn}, Holder: holder, LeaseTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	el := lease.New(db, lease.Options{Holder: holder, TTL: 3 * time.Second})
	o := botOptions(srv, instantSleep)
	o.UnhealthyAfter = 100 * time.Millisecond // a standby must not look down
	logs := &logBuf{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	o.Hold = func(ctx context.Context, name string, work func(context.Context, telegram.Lease) error) error {
		return el.Hold(ctx, name, func(ctx context.Context, l *lease.Lease) error { return work(ctx, l) })
	}
	bot, err := telegram.New(o)
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{Store: db, Agent: &echoAgent{}, Workers: workers, LeaseTTL: 5 * time.Second,
		Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	gw.AddChannel(bot)
	ctx, cancel := context.WithCancel(context.Background())
	r := &pollerReplica{bot: bot, logs: logs, db: db, el: el, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- gw.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		r.shutdown(t)
		_ = bot.Close()
		db.Close()
	})
	return r
}

func (r *pollerReplica) shutdown(t *testing.T) {
	t.Helper()
	if r.stop == nil {
		return
	}
	r.stop()
	r.stop = nil
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Error("a replica did not stop within 20s")
	}
}

// TestReplicasOnePollerUnderTheLease: two replicas on one PostgreSQL;
// only the holder of the bot's lease polls (no 409 fight); when it stops,
// the other takes the lease over within about a second, resumes at the
// offset kept in the lease, and every message of both halves is answered
// once.
func TestReplicasOnePollerUnderTheLease(t *testing.T) {
	dsn := pgtest.DSN(t)
	srv := telegramtest.New(t, token)
	a := startPollerReplica(t, srv, dsn, "replica-a")
	srv.WaitFor(t, "replica A polling", 10*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		return len(calls) > 0 && len(a.el.HeldNames()) == 1
	})
	b := startPollerReplica(t, srv, dsn, "replica-b")
	users := []string{"ann", "ben", "cid"}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			srv.AddUpdate(srv.Private(telegramtest.User(int64(700+i%len(users)), users[i%len(users)]), fmt.Sprintf("m%d", i)))
		}
	}
	send(0, 12)
	srv.WaitSent(t, 12, 20*time.Second)
	if held := b.el.HeldNames(); len(held) != 0 {
		t.Fatalf("replica B holds %v while A polls", held)
	}
	if err := b.bot.Healthy(); err != nil {
		t.Fatalf("replica B, standing by for the lease, reports the channel unhealthy: %v", err)
	}
	a.shutdown(t) // a rolling deploy: A gives the lease up
	handover := time.Now()
	srv.WaitFor(t, "replica B polling", 10*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return len(b.el.HeldNames()) == 1 })
	if d := time.Since(handover); d > 5*time.Second {
		t.Errorf("the lease moved to B %s after A stopped; a release should hand it over in about a second", d)
	}
	send(12, 24)
	srv.WaitSent(t, 24, 20*time.Second)
	time.Sleep(300 * time.Millisecond) // a wrong extra answer would show by now
	count := map[string]int{}
	for _, s := range srv.Sent() {
		count[s.Text]++
	}
	for i := 0; i < 24; i++ {
		if n := count[fmt.Sprintf("echo: m%d", i)]; n != 1 {
			t.Errorf("m%d answered %d times; want once", i, n)
		}
	}
	if len(srv.Sent()) != 24 {
		t.Errorf("%d messages sent; want 24", len(srv.Sent()))
	}
	for name, r := range map[string]*pollerReplica{"A": a, "B": b} {
		// The poller's log line for a 409 (not "409" alone: a log line's
		// time may hold it, as in 11:56:13.409Z).
		if strings.Contains(r.logs.String(), "409 Conflict") {
			t.Errorf("replica %s met a 409 Conflict: two replicas polled at once:\n%s", name, r.logs.String())
		}
	}
	if !strings.Contains(b.logs.String(), "resuming Telegram polling at the offset the last holder kept") {
		t.Errorf("replica B did not resume at A's offset:\n%s", b.logs.String())
	}
}

// logBuf is a log destination safe for concurrent writes.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
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
