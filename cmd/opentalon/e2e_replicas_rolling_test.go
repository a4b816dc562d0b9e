package main

// A rolling deploy of three replicas on one PostgreSQL under steady load
// (issue 23): each replica in turn gets SIGTERM, exits, and starts again,
// while messages keep coming — through Telegram webhooks behind a small
// round-robin proxy (as behind a load balancer), and through polling. No
// message is lost or answered twice (a graceful stop is no crash), each is
// answered in its own chat and in order per chat; in polling mode the
// poller's lease moves at each stop without waiting for it to run out.

import (
	"math/rand/v2"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// webhookServed finds the address a replica's Telegram webhook listens on
// in its log.
var webhookServed = regexp.MustCompile(`msg="Telegram webhook served".*? listen=(127\.0\.0\.1:\d+)`)

// leaseTaken is a replica's log line of a term of the Telegram bot's lease.
var leaseTaken = regexp.MustCompile(`msg="lease taken" lease=telegram:\S+`)

// pool is the round-robin proxy's view of the replicas: the webhook
// addresses of those in service.
type pool struct {
	mu    sync.Mutex
	addrs map[int]string
	next  int
}

func (p *pool) set(i int, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if addr == "" {
		delete(p.addrs, i)
		return
	}
	p.addrs[i] = addr
}

// pick returns the next address in turn ("" when none is in service).
func (p *pool) pick() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.addrs) == 0 {
		return ""
	}
	keys := make([]int, 0, len(p.addrs))
	for k := range p.addrs {
		keys = append(keys, k)
	}
	// Deterministic order: the replica numbers.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	p.next++
	return p.addrs[keys[p.next%len(keys)]]
}

func TestE2EReplicasRollingRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and restarts three processes, twice")
	}
	for _, mode := range []string{"webhook", "polling"} {
		t.Run(mode, func(t *testing.T) { rollingRestart(t, mode) })
	}
}

func rollingRestart(t *testing.T, mode string) {
	const (
		chats    = 20
		total    = 120
		replicas = 3
		secret   = "hook-SECRET"
	)
	dsn := pgtest.DSN(t)
	rnd := rand.New(rand.NewPCG(23, 6))
	var rndMu sync.Mutex
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		rndMu.Lock()
		wait := time.Duration(20+rnd.IntN(181)) * time.Millisecond
		rndMu.Unlock()
		time.Sleep(wait)
		return providertest.Echo(r)
	})
	bot := telegramtest.New(t, tgToken)
	bin := releaseBinary(t)
	hookSecret := ""
	if mode == "webhook" {
		hookSecret = secret
	}
	cfgs := replicaConfigs(t, replicas, llm.BaseURL(), bot.URL, dsn, hookSecret)
	procs := make([]*binProc, replicas)
	var logs []*lockedBuf
	in := &pool{addrs: map[int]string{}}
	start := func(i int) {
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", cfgs[i], "--log-level", "debug", "run")
		procs[i] = p
		logs = append(logs, p.stderr)
		if mode != "webhook" {
			return
		}
		in.set(i, servedWebhook(t, i, p))
	}
	for i := range procs {
		start(i)
	}

	// deliver hands an update to the cluster as Telegram does: through
	// the load balancer, again until one replica answers 200.
	deliver := func(u models.Update) {
		if mode != "webhook" {
			bot.AddUpdate(u)
			return
		}
		deliverWebhook(t, in, secret, u)
	}

	// Steady load: a message every 50 ms over the whole restart.
	load := steadyLoad(bot, 6000, chats, total, mode+"-", 50*time.Millisecond, deliver)

	// The rolling deploy: each replica in turn is taken out of the
	// balancer, stopped with SIGTERM (it must exit 0) and started again.
	bot.WaitFor(t, "the first answers", 30*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool { return len(sent) >= 5 })
	var stops []time.Time
	for i := range procs {
		in.set(i, "")
		stops = append(stops, time.Now())
		if err := procs[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := procs[i].exitCode(60 * time.Second); code != 0 {
			t.Fatalf("replica %d exit code %d after SIGTERM; its log:\n%s", i, code, tail(procs[i].stderr.String(), 40))
		}
		start(i)
	}
	msgs := load()
	waitAnswered(t, bot, msgs, mode, logs, 90*time.Second)
	for i, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.exitCode(60 * time.Second); code != 0 {
			t.Errorf("replica %d exit code %d; its log:\n%s", i, code, tail(p.stderr.String(), 40))
		}
	}

	// Every stop was graceful: nothing may be sent twice.
	checkAnswers(t, bot, msgs, func(a, b telegramtest.Sent) bool { return false })

	switch mode {
	case "webhook":
		// One replica registers the webhook at a time: once per term of
		// the bot's lease (the first holder's, and one per handover; a
		// renewal lost on a loaded machine is a handover too).
		terms := 0
		for _, l := range logs {
			terms += len(leaseTaken.FindAllString(l.String(), -1))
		}
		if n := len(bot.Calls("setWebhook")); n < 1 || n > terms {
			t.Errorf("setWebhook was called %d times; want once per term of the bot's lease (%d terms)", n, terms)
		}
	case "polling":
		// A stopping holder releases the poller's lease: the next
		// replica polls well before the lease could have run out.
		var gap time.Duration
		var last time.Time
		for _, c := range bot.Calls("getUpdates") {
			if c.At.After(stops[0]) && !last.IsZero() {
				gap = max(gap, c.At.Sub(last))
			}
			last = c.At
		}
		t.Logf("the longest pause between two polls during the rolling restart: %s", gap.Round(time.Millisecond))
		// The lease was handed over, not left to run out. How long the
		// gap is (issue 23: under 2 s) is BenchmarkPerfFailover's
		// handover-poll-s; a timed bound here failed in the loaded -race
		// suite (2.7 s) while the handover worked.
		if gap >= lease.DefaultTTL {
			t.Errorf("the poller paused %s during the rolling restart; a stopping replica must hand its lease over, not let it run out (%s)", gap, lease.DefaultTTL)
		}
	}
	t.Logf("%s: %d messages over %d chats on %d replicas restarted one by one, %d sends, %d LLM calls", mode, len(msgs), chats, replicas, len(bot.Sent()), llm.Count())
}
