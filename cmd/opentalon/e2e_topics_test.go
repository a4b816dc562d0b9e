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

// TestE2ENewInATopicLeavesTheOtherTopics: forum topics are separate
// conversations: /new in one is answered there and forgets only its own
// history; another topic's next question still has its own.
func TestE2ENewInATopicLeavesTheOtherTopics(t *testing.T) {
	t.Parallel()
	llm, bot, _ := numberedAnswers(t)
	alice := telegramtest.User(42, "alice")
	const group = -100998
	mention := "@" + bot.Bot.Username + " "
	sent := 0
	say := func(topic int, text string) telegramtest.Sent {
		t.Helper()
		bot.AddUpdate(bot.Group(group, alice, text, topic))
		sent++
		got := bot.WaitSent(t, sent, 20*time.Second)[sent-1]
		if got.ThreadID != topic {
			t.Fatalf("the answer to %q went to topic %d; want %d", text, got.ThreadID, topic)
		}
		return got
	}
	history := func() string {
		r, _ := llm.Last()
		var all []string
		for _, m := range r.Messages {
			all = append(all, m.Content)
		}
		return strings.Join(all, "\n")
	}
	say(7, mention+"first question in seven")
	say(9, mention+"first question in nine")
	say(7, "/new@"+bot.Bot.Username)
	say(9, mention+"second in nine")
	if h := history(); !strings.Contains(h, "first question in nine") {
		t.Fatalf("topic 9 after /new in topic 7 was asked with:\n%s\nwant its own history kept", h)
	}
	say(7, mention+"second in seven")
	if h := history(); strings.Contains(h, "first question in seven") || strings.Contains(h, "nine") {
		t.Fatalf("topic 7 after its /new was asked with:\n%s\nwant a fresh conversation", h)
	}
}
