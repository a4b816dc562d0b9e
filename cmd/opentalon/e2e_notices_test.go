package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2ETelegramGroupAnswersBeforeNotices is the audit's burst in
// small: more people mention the bot in a group at once than
// queue.max_pending takes. Each one refused is told so, but those
// notices are a courtesy: the real answers go out before the notices
// still waiting for the group's pacing, not behind all of them. And each
// notice speaks of the chat's earlier messages, not the sender's.
//
// Not parallel: it times answers against a 600 ms pacing, and beside the
// crash-loop test's processes under -race an answer was not ready for
// four turns (the full suite failed it once).
func TestE2ETelegramGroupAnswersBeforeNotices(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	// No answer is ready before the whole burst was taken: under load the
	// first answer was done before the third mention was handled, and a
	// third message was taken in its place (the full suite failed it).
	taken := make(chan struct{})
	var takeOnce sync.Once
	burstTaken := func() { takeOnce.Do(func() { close(taken) }) }
	t.Cleanup(burstTaken)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		<-taken
		return providertest.Echo(r)
	})
	bot := telegramtest.New(t, tgToken)
	dir := t.TempDir()
	cfg := loadConfigFile(t, writeConfig(t, telegramConfig(dir, llm.BaseURL(), bot.URL)))
	cfg.Queue.MaxPending = 2
	// The mentions wait before the gateway polls: its first getUpdates
	// takes them in one batch (one by one, the first answer could be done
	// before the third arrived, and a third message was taken).
	const group, senders = -100555, 10
	for i := range senders {
		bot.AddUpdate(bot.Group(group, telegramtest.User(int64(1000+i), fmt.Sprintf("user%d", i)), fmt.Sprintf("@%s question %d", bot.Bot.Username, i), 0))
	}
	// A 600 ms group gap: three sends go at once, then one per gap.
	startAppWith(t, cfg, AppOptions{Telegram: func(o *telegram.Options) { o.SendGap = 200 * time.Millisecond }})
	// The next poll comes once the first one's batch was handled.
	bot.WaitFor(t, "the burst taken", 30*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		polls := 0
		for _, c := range calls {
			if c.Method == "getUpdates" {
				polls++
			}
		}
		return polls >= 2
	})
	burstTaken()
	sent := bot.WaitSent(t, senders, 30*time.Second)
	var order []string
	answers := 0
	for i, s := range sent {
		switch {
		case strings.Contains(s.Text, "echo:"):
			answers++
			order = append(order, "answer")
			// The notices sent first are the group's burst of three
			// (before any answer was ready); every answer goes in the
			// turns after it, before the notices still waiting.
			if i >= 3+cfg.Queue.MaxPending {
				t.Errorf("answer %q was message %d of %d sent", s.Text, i+1, len(sent))
			}
		case strings.Contains(s.Text, "I am still working on"):
			order = append(order, "notice")
			// max_pending counts everyone's messages: in a group the ones
			// waiting are other people's, not "your earlier messages".
			if want := "I am still working on earlier messages in this chat, so I did not take this one. Please send it again in a little while."; s.Text != want {
				t.Errorf("notice %q in a group, want %q", s.Text, want)
			}
		default:
			t.Errorf("unexpected message %q", s.Text)
		}
	}
	if answers != cfg.Queue.MaxPending {
		t.Errorf("%d answers, want %d", answers, cfg.Queue.MaxPending)
	}
	if t.Failed() {
		t.Logf("sent in this order: %v", order)
	}
}
