package main

// Commands and reactions on two replicas behind one webhook (issue 23):
// what one replica took must hold when the next update reaches the other.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

func TestE2EReplicasShareCommandsAndReactions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes")
	}
	const secret = "hook-SECRET"
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	story := words(600, 4) // half a minute at 50 ms a chunk
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if strings.Contains(r.LastUser(), "story") {
			return providertest.Script{Chunks: story, ChunkDelay: 50 * time.Millisecond}
		}
		return modelReply(r)
	})
	bot := telegramtest.New(t, tgToken)
	bin := releaseBinary(t)
	addrs := make([]string, 2)
	procs := make([]*binProc, 2)
	for i := range procs {
		y := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)
		y = strings.Replace(y, "    fake/small: { alias: small, weight: 80, context_window: 8000 }\n",
			"    fake/small: { alias: small, weight: 80, context_window: 8000 }\n    fake/big: { alias: big, weight: 20, context_window: 8000 }\n", 1)
		y = insertUnder(y, "routing", "  escalate_on_reaction: true\n")
		y = strings.Replace(y, "    token: ", fmt.Sprintf("    mode: webhook\n    webhook: { listen: \"127.0.0.1:0\", url: \"https://bot.example.com/telegram\", secret: %q }\n    token: ", secret), 1)
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
		procs[i] = p
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if m := webhookServed.FindStringSubmatch(p.stderr.String()); m != nil {
				addrs[i] = m[1]
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d never served its webhook; its log:\n%s", i, tail(p.stderr.String(), 40))
			}
		}
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(60 * time.Second)
		}
	})
	deliver := func(i int, u models.Update) {
		t.Helper()
		b, _ := json.Marshal(u)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addrs[i]+"/telegram", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("replica %d answered the webhook %d", i, res.StatusCode)
		}
	}
	reads := reading(bot)
	// send delivers u to replica i and returns how many messages the bot
	// had sent before (taken first: the answer may come before deliver
	// returns).
	send := func(i int, u models.Update) (seen int) {
		t.Helper()
		seen = len(bot.Sent())
		deliver(i, u)
		return seen
	}
	// answer waits for a message from the bot, past the first seen,
	// containing want.
	answer := func(seen int, what, want string) telegramtest.Sent {
		t.Helper()
		var got telegramtest.Sent
		bot.WaitFor(t, what, 30*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
			for _, s := range sent[min(seen, len(sent)):] {
				if strings.Contains(reads(s), want) {
					got = s
					return true
				}
			}
			return false
		})
		return got
	}
	alice := telegramtest.User(7100, "alice")

	// 1. A question on replica 0, answered by the primary.
	seen := send(0, bot.Private(alice, "what is a monad?"))
	first := answer(seen, "the first answer", "answer from small")

	// 2. A 👎 on that answer reaches replica 1: the question is answered
	// again by the next model.
	before := llm.Count()
	seen = send(1, telegramtest.Reaction(alice.ID, models.ChatTypePrivate, first.MessageID, alice, nil, []string{"👎"}))
	answer(seen, "the re-answer after 👎 on the other replica", "answer from big")
	if llm.Count() != before+1 {
		t.Errorf("the 👎 made %d LLM calls; want one", llm.Count()-before)
	}

	// 3. /model big on replica 1, then a message on replica 0 uses it.
	seen = send(1, bot.Private(alice, "/model big"))
	answer(seen, "/model's confirmation", "Pinned fake/big")
	seen = send(0, bot.Private(alice, "and a functor?"))
	answer(seen, "the answer after /model on the other replica", "answer from big")

	// 4. /stop reaches the replica writing the answer: a long answer
	// streams from one replica, /stop arrives at the other.
	const processing = `msg="processing request"`
	runs := func() [2]int {
		return [2]int{strings.Count(procs[0].stderr.String(), processing), strings.Count(procs[1].stderr.String(), processing)}
	}
	before4 := runs()
	seen = send(0, bot.Private(alice, "tell me a long story"))
	answer(seen, "the story streaming", "w0")
	now := runs()
	writer := 0
	if now[1] > before4[1] {
		writer = 1
	}
	if now[writer] != before4[writer]+1 || now[1-writer] != before4[1-writer] {
		t.Fatalf("requests processed went from %v to %v; want the story on one replica", before4, now)
	}
	seen = send(1-writer, bot.Private(alice, "/stop"))
	answer(seen, "/stop's answer", "Stopped.")
	if !strings.Contains(procs[writer].stderr.String(), "/stop from the database: stopped the answer being written here") {
		t.Errorf("replica %d wrote the story, and its log does not say the stop from replica %d reached it", writer, 1-writer)
	}
}
