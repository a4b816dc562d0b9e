package main

// Three replicas of one bot on one PostgreSQL (issue 23): the real binary
// started three times with distinct data directories and ports, a fake
// Telegram in polling mode, a fake LLM that takes 20–200 ms and fails one
// call in ten with a 500 and one in twenty with a 429. The replica that
// holds the bot's poller lease is killed with SIGKILL mid-way; another
// takes the lease over, within the lease's time, and resumes at the
// offset kept in it; then a replica that does not poll is killed too, and
// both come back. Every message
// is answered, in its own chat, in message order per chat, once — except
// a part whose send completed just before the kill (the crash loop's
// documented window).

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/store/pgtest"
)

// pollerHeld is the log line of a replica that took the Telegram lease.
const pollerHeld = "this replica holds the Telegram lease"

func TestE2EReplicasAnswerAsOneBot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills three processes")
	}
	const (
		chats    = 30
		before   = 90 // messages before the kill
		after    = 90 // and after it
		again    = 60 // after a second replica was killed and both restarted
		replicas = 3
	)
	dsn := pgtest.DSN(t)
	llm := faultyLLM(t, 5)
	bot := telegramtest.New(t, tgToken)
	bin := releaseBinary(t)
	cfgs := make([]string, replicas)
	for i := range cfgs {
		y := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		y = insertUnder(y, "queue", "  lease_ttl: 3s\n")
		cfgs[i] = writeConfig(t, y)
	}
	procs := make([]*binProc, replicas)
	var logs []*lockedBuf
	start := func(i int) {
		procs[i] = startBinaryAt(t, bin, childEnv(), nil, "--config", cfgs[i], "--log-level", "debug", "run")
		logs = append(logs, procs[i].stderr)
	}
	for i := range procs {
		start(i)
	}
	// holder is the replica whose log says it took the lease last.
	holder := func() int {
		h, at := -1, -1
		for i, p := range procs {
			if p == nil {
				continue
			}
			if n := strings.LastIndex(p.stderr.String(), pollerHeld); n >= 0 && (h < 0 || n > at) {
				// Only one process holds the lease at a time; the log of
				// a killed one is gone from procs.
				h, at = i, n
			}
		}
		return h
	}

	var msgs []chatMsg
	users := make([]*models.User, chats)
	for i := range users {
		users[i] = telegramtest.User(int64(5000+i), "")
	}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			u := bot.Private(users[i%chats], "r"+strconv.Itoa(i))
			bot.AddUpdate(u)
			msgs = append(msgs, chatMsg{chat: u.Message.Chat.ID, id: u.Message.ID, text: u.Message.Text})
		}
	}
	waitHolder := func(what string) int {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if h := holder(); h >= 0 {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica took the poller lease (%s)", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := waitHolder("at start")
	send(0, before)
	// The kill comes while the first half is being answered.
	bot.WaitFor(t, "a third of the first half answered", 30*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return len(sent) >= before/3
	})
	killed := kill{signal: time.Now()}
	if err := procs[first].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := procs[first].exitCode(30 * time.Second); code != -1 {
		t.Fatalf("exit code %d, want killed", code)
	}
	killed.dead = time.Now()
	procs[first] = nil
	send(before, before+after)
	next := waitHolder("after the kill")
	took := time.Since(killed.dead)
	t.Logf("replica %d held the poller and was killed; replica %d took over %s after", first, next, took.Round(time.Millisecond))
	// The poller came back by the lease running out (issue 23: within
	// its time and a poll, which BenchmarkPerfFailover measures), not
	// later: twice the lease is far from either on a loaded machine.
	if took > 2*lease.DefaultTTL {
		t.Errorf("the poller came back %s after the kill; want it once the lease (%s) ran out", took, lease.DefaultTTL)
	}

	// Then a replica that does not poll dies too, while the second half
	// is answered, and both come back: the queue it was answering is
	// taken back, the restarted ones stand by.
	bot.WaitFor(t, "a part of the second half answered", 60*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return len(sent) >= before+after/4
	})
	other := -1
	for i, p := range procs {
		if p != nil && i != next {
			other = i
		}
	}
	second := kill{signal: time.Now()}
	if err := procs[other].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := procs[other].exitCode(30 * time.Second); code != -1 {
		t.Fatalf("exit code %d, want killed", code)
	}
	second.dead = time.Now()
	procs[other] = nil
	start(first)
	start(other)
	send(before+after, before+after+again)

	waitAnswered(t, bot, msgs, "r", logs, 90*time.Second)
	for i, p := range procs {
		if p == nil {
			continue
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.exitCode(60 * time.Second); code != 0 {
			t.Errorf("replica %d exit code %d; stderr:\n%s", i, code, tail(p.stderr.String(), 40))
		}
	}

	checkAnswers(t, bot, msgs, func(a, b telegramtest.Sent) bool { return killBetween([]kill{killed, second}, a.At, b.At) })
	t.Logf("%d messages over %d chats on %d replicas, %d sends, %d LLM calls", len(msgs), chats, replicas, len(bot.Sent()), llm.Count())
}
