package main

// Issue 3: a Telegram edit replaces the text of a message still waiting
// in the queue, and is ignored once the message was answered.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestE2ETelegramEditOfAWaitingMessage(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	waitAddr(t, h.app)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := telegramtest.User(42, "alice")
	committed := func(id int64) {
		t.Helper()
		bot.WaitFor(t, "the update committed", 20*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return bot.Confirmed() > id })
	}
	edit := func(u models.Update, text string) {
		t.Helper()
		m := *u.Message
		m.Text = text
		m.EditDate = int(time.Now().Unix())
		committed(bot.AddUpdate(models.Update{EditedMessage: &m}))
	}

	// The first question holds the conversation at the LLM; the second
	// waits in the queue behind it and is edited there.
	llm.Hold()
	bot.AddUpdate(bot.Private(alice, "first question"))
	if err := llm.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	second := bot.Private(alice, "second question")
	committed(bot.AddUpdate(second))
	edit(second, "second question, edited")
	llm.Release()
	bot.WaitSent(t, 2, 20*time.Second)
	reqs := llm.Requests()
	if len(reqs) != 2 || reqs[1].LastUser() != "second question, edited" {
		var got []string
		for _, r := range reqs {
			got = append(got, r.LastUser())
		}
		t.Fatalf("the LLM was asked %q; want the first question, then the edited text of the second", got)
	}

	// An edit of an answered message changes nothing: no new answer, and
	// the history keeps the text that was answered.
	edit(second, "too late")
	bot.AddUpdate(bot.Private(alice, "third question"))
	bot.WaitSent(t, 3, 20*time.Second)
	if n := llm.Count(); n != 3 {
		t.Fatalf("LLM calls = %d; want 3 (the late edit answered by nobody)", n)
	}
	last, _ := llm.Last()
	var history []string
	for _, m := range last.Messages {
		history = append(history, m.Content)
	}
	joined := strings.Join(history, "\n")
	if last.LastUser() != "third question" || strings.Contains(joined, "too late") || !strings.Contains(joined, "second question, edited") {
		t.Fatalf("third request's messages:\n%s\nwant the edited second question in the history and not the late edit", joined)
	}
	if n := bot.SentCount(); n != 3 {
		t.Fatalf("sent %d messages; want 3", n)
	}
}
