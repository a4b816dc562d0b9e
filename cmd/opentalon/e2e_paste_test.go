package main

import (
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
)

// TestE2ESplitPasteInATopicIsOneQuestion: a text over Telegram's 4,096
// characters, which the user's app sent as two messages in a forum topic,
// is answered once, in that topic, the model reading the whole text; the
// user's next message there is the same conversation.
func TestE2ESplitPasteInATopicIsOneQuestion(t *testing.T) {
	t.Parallel()
	llm, bot, _ := numberedAnswers(t)
	alice := telegramtest.User(42, "alice")
	const group, topic = -100999, 7
	mention := "@" + bot.Bot.Username + " "
	part1 := mention + strings.Repeat("log line ", 4090/9)
	part2 := "end of the log. What failed?"
	bot.AddUpdate(bot.Group(group, alice, part1, topic))
	bot.AddUpdate(bot.Group(group, alice, part2, topic))
	got := bot.WaitSent(t, 1, 20*time.Second)[0]
	if got.ThreadID != topic || !strings.Contains(got.Text, "answer 1") {
		t.Fatalf("answer = %+v; want answer 1 in topic %d", got, topic)
	}
	r, _ := llm.Last()
	if q := r.LastUser(); !strings.Contains(q, "log line log line") || !strings.HasSuffix(q, part2) {
		t.Fatalf("the model was asked %d characters ending %q; want both parts", len(q), q[max(0, len(q)-60):])
	}
	bot.AddUpdate(bot.Group(group, alice, mention+"thanks", topic))
	sent := bot.WaitSent(t, 2, 20*time.Second)
	if len(sent) != 2 || sent[1].ThreadID != topic || !strings.Contains(sent[1].Text, "answer 2") {
		t.Fatalf("sent %+v; want one answer to the paste and one to the follow-up, in topic %d", sent, topic)
	}
	r, _ = llm.Last()
	if llm.Count() != 2 || len(r.Messages) < 3 || !strings.HasSuffix(r.Messages[len(r.Messages)-2].Content, "answer 1") {
		t.Fatalf("LLM calls %d, last with %d messages; want 2, the follow-up after the paste's turn", llm.Count(), len(r.Messages))
	}
}
