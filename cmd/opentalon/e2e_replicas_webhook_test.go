package main

// Issue 23's multi-replica test in webhook mode: three replicas on one
// PostgreSQL serve Telegram's webhook behind a small round-robin proxy (a
// load balancer), under steady load, with a fake LLM that is slow and
// fails now and then. One replica is killed with SIGKILL mid-way, and
// later a second one; both come back. Telegram delivers again what no
// replica acknowledged, so every message is answered, in its own chat, in
// order per chat, once, but for a part whose send completed just before a
// kill (the crash loop's documented window).

import (
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/store/pgtest"
)

func TestE2EReplicasWebhookThroughKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts, kills and restarts three processes")
	}
	const (
		chats    = 20
		total    = 150
		replicas = 3
		secret   = "hook-SECRET"
	)
	dsn := pgtest.DSN(t)
	llm := faultyLLM(t, 7)
	bot := telegramtest.New(t, tgToken)
	bin := releaseBinary(t)
	cfgs := replicaConfigs(t, replicas, llm.BaseURL(), bot.URL, dsn, secret)
	procs := make([]*binProc, replicas)
	var logs []*lockedBuf
	in := &pool{addrs: map[int]string{}}
	start := func(i int) {
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", cfgs[i], "--log-level", "debug", "run")
		procs[i] = p
		logs = append(logs, p.stderr)
		in.set(i, servedWebhook(t, i, p))
	}
	for i := range procs {
		start(i)
	}
	// killNow kills replica i with SIGKILL, in the balancer until it is
	// gone (what it was handed then is refused or dropped, and Telegram
	// delivers it again), and says when.
	killNow := func(i int) kill {
		k := kill{signal: time.Now()}
		if err := procs[i].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if code := procs[i].exitCode(30 * time.Second); code != -1 {
			t.Fatalf("replica %d exit code %d, want killed", i, code)
		}
		k.dead = time.Now()
		in.set(i, "")
		procs[i] = nil
		return k
	}

	load := steadyLoad(bot, 7000, chats, total, "w", 40*time.Millisecond, func(u models.Update) { deliverWebhook(t, in, secret, u) })

	answered := func(n int) func([]telegramtest.Sent, []telegramtest.Call) bool {
		return func(sent []telegramtest.Sent, _ []telegramtest.Call) bool { return len(sent) >= n }
	}
	bot.WaitFor(t, "a fifth answered", 60*time.Second, answered(total/5))
	first := killNow(0)
	bot.WaitFor(t, "half answered", 60*time.Second, answered(total/2))
	second := killNow(1)
	start(0)
	start(1)
	msgs := load()
	waitAnswered(t, bot, msgs, "w", logs, 90*time.Second)
	for i, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.exitCode(60 * time.Second); code != 0 {
			t.Errorf("replica %d exit code %d; its log:\n%s", i, code, tail(p.stderr.String(), 40))
		}
	}
	checkAnswers(t, bot, msgs, func(a, b telegramtest.Sent) bool { return killBetween([]kill{first, second}, a.At, b.At) })
	t.Logf("%d messages over %d chats on %d replicas, two killed and restarted: %d sends, %d LLM calls", len(msgs), chats, replicas, len(bot.Sent()), llm.Count())
}
