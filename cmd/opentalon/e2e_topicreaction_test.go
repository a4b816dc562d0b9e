package main

// Issues 3, 4 and 9 (finding 15): a 👎 on the bot's answer in a forum
// topic re-answers that topic's question, in that topic, and records the
// negative signal for that answer.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestE2EThumbsDownInAForumTopic(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Text: fmt.Sprintf("answer %d", r.N)}
	})
	bot := telegramtest.New(t, tgToken)
	cfg := strings.Replace(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL), "  primary: fake/small\n", "  primary: fake/small\n  escalate_on_reaction: true\n", 1)
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	waitAddr(t, h.app)
	alice := telegramtest.User(42, "alice")
	const group, topicA, topicB = -100777, 11, 12
	mention := "@" + bot.Bot.Username + " "

	bot.AddUpdate(bot.Group(group, alice, mention+"question in topic A", topicA))
	first := bot.WaitSent(t, 1, 20*time.Second)[0]
	bot.AddUpdate(bot.Group(group, alice, mention+"question in topic B", topicB))
	bot.WaitSent(t, 2, 20*time.Second)

	// Telegram's message_reaction names the chat and message only.
	bot.AddUpdate(telegramtest.Reaction(group, models.ChatTypeSupergroup, first.MessageID, alice, nil, []string{"👎"}))
	again := bot.WaitSent(t, 3, 20*time.Second)[2]
	if again.ChatID != group || again.ThreadID != topicA {
		t.Fatalf("the re-answer went to chat %d topic %d; want topic %d of chat %d", again.ChatID, again.ThreadID, topicA, group)
	}
	r, _ := llm.Last()
	if llm.Count() != 3 || !strings.Contains(r.LastUser(), "question in topic A") {
		t.Fatalf("LLM calls = %d, last question %q; want topic A's question answered again", llm.Count(), r.LastUser())
	}
	for _, m := range r.Messages {
		if strings.Contains(m.Content, "topic B") {
			t.Fatalf("the re-answer's history holds topic B's turn: %+v", r.Messages)
		}
	}
	sigs, err := h.app.db.SignalsForReply(context.Background(), deliveredReply(t, h, "telegram", fmt.Sprintf("%d:%d", group, first.MessageID)).ID)
	if err != nil {
		t.Fatal(err)
	}
	neg := false
	for _, s := range sigs {
		neg = neg || s.Polarity == core.Negative
	}
	if !neg {
		t.Fatalf("signals on the judged answer = %+v; want a negative one", sigs)
	}
}
