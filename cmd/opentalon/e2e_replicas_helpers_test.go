package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// faultyLLM is the replica tests' fake LLM: each answer takes 20-200 ms,
// and one call in ten fails with a 500, one in twenty with a 429 asking
// a second's wait (a seeded sequence).
func faultyLLM(t *testing.T, seed uint64) *providertest.Server {
	rnd := rand.New(rand.NewPCG(23, seed))
	var mu sync.Mutex
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		mu.Lock()
		x, wait := rnd.Float64(), time.Duration(20+rnd.IntN(181))*time.Millisecond
		mu.Unlock()
		time.Sleep(wait)
		switch {
		case x < 0.10:
			return providertest.Script{Status: 500}
		case x < 0.15:
			return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "1"}}
		}
		return providertest.Echo(r)
	})
	return llm
}

// deliverWebhook hands u to the replicas as Telegram hands a webhook
// update to a load balancer: to the next replica in, again until one
// answers 200 (a refused or dropped connection is a replica gone). It
// gives up with an error after a minute.
func deliverWebhook(t *testing.T, in *pool, secret string, u models.Update) {
	b, _ := json.Marshal(u)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("update %d was refused by every replica for a minute", u.ID)
			return
		}
		addr := in.pick()
		if addr == "" {
			continue
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/telegram", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			return
		}
	}
}

// chatMsg is a message a replica test sent to the bot.
type chatMsg struct {
	chat int64
	id   int
	text string
}

// reading returns what a sent message reads now (after its edits).
func reading(bot *telegramtest.Server) func(telegramtest.Sent) string {
	return func(s telegramtest.Sent) string {
		text, _ := bot.Text(s.ChatID, s.MessageID)
		return text
	}
}

// waitAnswered waits until every message has an answer quoting it (its
// echo, which starts with "echo: "+prefix, or an apology); after d it
// fails naming each message without one, with its conversation's log.
func waitAnswered(t *testing.T, bot *telegramtest.Server, msgs []chatMsg, prefix string, logs []*lockedBuf, d time.Duration) {
	t.Helper()
	reads := reading(bot)
	answered := func() map[int]bool {
		got := map[int]bool{}
		for _, s := range bot.Sent() {
			if text := reads(s); strings.HasPrefix(text, "echo: "+prefix) || strings.HasPrefix(text, "Sorry") {
				got[s.ReplyTo] = true
			}
		}
		return got
	}
	for deadline := time.Now().Add(d); len(answered()) < len(msgs); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			got := answered()
			var report strings.Builder
			for _, m := range msgs {
				if !got[m.id] {
					fmt.Fprintf(&report, "%q (chat %d) has no answer; its conversation's log:\n%s", m.text, m.chat, convLog(logs, m.chat))
				}
			}
			t.Fatalf("after %s:\n%s", d, report.String())
		}
	}
}

// checkAnswers checks what the bot sent for msgs: no apology; each
// message its own echo, in its own chat, quoting it; per chat in message
// order; a second copy only where again(first, second) allows it (a kill
// in between).
func checkAnswers(t *testing.T, bot *telegramtest.Server, msgs []chatMsg, again func(a, b telegramtest.Sent) bool) {
	t.Helper()
	reads := reading(bot)
	byText := map[string][]telegramtest.Sent{}
	for _, s := range bot.Sent() {
		byText[reads(s)] = append(byText[reads(s)], s)
		if strings.HasPrefix(reads(s), "Sorry") {
			t.Errorf("an apology in chat %d for passing faults: %q", s.ChatID, reads(s))
		}
	}
	lastAnswer := map[int64]time.Time{} // per chat, the first answer of the previous message
	for _, m := range msgs {
		copies := byText["echo: "+m.text]
		if len(copies) == 0 {
			t.Errorf("%q (chat %d) got no answer of its own", m.text, m.chat)
			continue
		}
		for _, s := range copies {
			if s.ChatID != m.chat || s.ReplyTo != m.id {
				t.Errorf("the answer to %q (chat %d, message %d) went to chat %d quoting %d", m.text, m.chat, m.id, s.ChatID, s.ReplyTo)
			}
		}
		for k := 1; k < len(copies); k++ {
			if !again(copies[k-1], copies[k]) {
				t.Errorf("%q was answered twice (%s and %s) with no kill in between", m.text,
					copies[k-1].At.Format("15:04:05.000"), copies[k].At.Format("15:04:05.000"))
			}
		}
		if prev, ok := lastAnswer[m.chat]; ok && copies[0].At.Before(prev) {
			t.Errorf("%q in chat %d was answered before the message sent ahead of it", m.text, m.chat)
		}
		lastAnswer[m.chat] = copies[0].At
	}
}

// steadyLoad sends total private messages (texts prefix+i) round robin
// over chats users (ids from base), one every gap, in one ordered stream
// as Telegram delivers a bot's updates, each through deliver. wait
// returns the messages once the last one was delivered.
func steadyLoad(bot *telegramtest.Server, base int64, chats, total int, prefix string, gap time.Duration, deliver func(models.Update)) (wait func() []chatMsg) {
	users := make([]*models.User, chats)
	for i := range users {
		users[i] = telegramtest.User(base+int64(i), "")
	}
	msgs := make([]chatMsg, 0, total)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			u := bot.Private(users[i%chats], prefix+strconv.Itoa(i))
			msgs = append(msgs, chatMsg{chat: u.Message.Chat.ID, id: u.Message.ID, text: u.Message.Text})
			deliver(u)
			time.Sleep(gap)
		}
	}()
	return func() []chatMsg {
		<-done
		return msgs
	}
}

// servedWebhook waits for replica i's log to say where its Telegram
// webhook listens and returns that address.
func servedWebhook(t *testing.T, i int, p *binProc) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := webhookServed.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %d never served its webhook; its log:\n%s", i, tail(p.stderr.String(), 40))
		}
	}
}

// webhookMode turns a telegramConfig's Telegram channel to webhook mode:
// served on a free loopback port, with secret as its secret token.
func webhookMode(y, secret string) string {
	return strings.Replace(y, "    token: ", fmt.Sprintf("    mode: webhook\n    webhook: { listen: \"127.0.0.1:0\", url: \"https://bot.example.com/telegram\", secret: %q }\n    token: ", secret), 1)
}

// replicaConfigs writes n replicas' configs: telegramConfig on the
// PostgreSQL at dsn with a 3 s lease, each in its own data directory; in
// webhook mode with secret ("" = polling).
func replicaConfigs(t *testing.T, n int, llmURL, botURL, dsn, secret string) []string {
	cfgs := make([]string, n)
	for i := range cfgs {
		y := telegramConfig(t.TempDir(), llmURL, botURL)
		if secret != "" {
			y = webhookMode(y, secret)
		}
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		y = insertUnder(y, "queue", "  lease_ttl: 3s\n")
		cfgs[i] = writeConfig(t, y)
	}
	return cfgs
}
