package main

// A Telegram group through the whole App: the model is told who speaks,
// and another member's /retry or follow-up does not replace or judge
// someone's answer.

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

// numberedAnswers starts the gateway on a fake Telegram and a fake LLM
// whose nth answer is "answer n".
func numberedAnswers(t *testing.T) (*providertest.Server, *telegramtest.Server, *harness) {
	t.Helper()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Text: fmt.Sprintf("answer %d", r.N)}
	})
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	waitAddr(t, h.app)
	return llm, bot, h
}

func TestE2EGroupSpeakersAndRetry(t *testing.T) {
	t.Parallel()
	llm, bot, _ := numberedAnswers(t)
	alice, bob := telegramtest.User(42, "alice"), telegramtest.User(43, "bob")
	const group = -100888
	mention := "@" + bot.Bot.Username + " "
	sent := 0
	say := func(from *models.User, text string) telegramtest.Sent {
		t.Helper()
		bot.AddUpdate(bot.Group(group, from, text, 0))
		sent++
		return bot.WaitSent(t, sent, 20*time.Second)[sent-1]
	}

	if got := say(alice, mention+"what is a monad?"); !strings.Contains(got.Text, "answer 1") {
		t.Fatalf("alice's question answered %q", got.Text)
	}
	// Bob's /retry of Alice's answer: refused, naming who may; no LLM call.
	if got := say(bob, "/retry@"+bot.Bot.Username); !strings.Contains(got.Text, "Only @alice can retry this answer") {
		t.Fatalf("bob's /retry of alice's answer = %q; want it refused", got.Text)
	}
	if n := llm.Count(); n != 1 {
		t.Fatalf("LLM calls after bob's /retry = %d; want 1", n)
	}

	// Bob's question: the model reads Alice's turn as hers and is told
	// Bob asks; Bob's words are given as typed.
	say(bob, mention+"what did alice ask?")
	r, _ := llm.Last()
	if !strings.HasSuffix(r.System, `The message you answer is from "@bob".`) {
		t.Fatalf("system prompt ends %q; want the sender named", r.System[max(0, len(r.System)-120):])
	}
	var msgs []string
	for _, m := range r.Messages {
		msgs = append(msgs, string(m.Role)+"|"+m.Content)
	}
	if got := strings.Join(msgs, "\n"); !strings.HasPrefix(got, "user|@alice: ") || !strings.HasSuffix(got, "user|"+r.LastUser()) || strings.Contains(r.LastUser(), "@bob:") {
		t.Fatalf("messages:\n%s\nwant alice's turn attributed and bob's as typed", got)
	}

	// Bob's own /retry re-answers his question.
	calls := llm.Count()
	say(bob, "/retry@"+bot.Bot.Username)
	if r, _ := llm.Last(); llm.Count() != calls+1 || !strings.Contains(r.LastUser(), "what did alice ask?") {
		t.Fatalf("bob's own /retry: %d calls, last question %q; want his question answered again", llm.Count()-calls, r.LastUser())
	}
}

// TestE2EPrivateThumbsDownReanswersAsPrivate: Telegram does not say
// whether a reaction's chat is private; a 👎 re-answer in a private chat
// is still given as that chat's answers are: no group line, and the
// user's private memories recalled.
func TestE2EPrivateThumbsDownReanswersAsPrivate(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Text: fmt.Sprintf("answer %d", r.N)}
	})
	bot := telegramtest.New(t, tgToken)
	dir := t.TempDir()
	cfg := strings.Replace(telegramConfig(dir, llm.BaseURL(), bot.URL), "  primary: fake/small\n", "  primary: fake/small\n  escalate_on_reaction: true\n", 1)
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	waitAddr(t, h.app)
	alice := telegramtest.User(42, "alice")
	if _, err := h.app.db.SaveMemory(context.Background(), core.Memory{Owner: "telegram:42", Content: "Alice's doctor appointment is on Tuesday"}); err != nil {
		t.Fatal(err)
	}

	bot.AddUpdate(bot.Private(alice, "when is my doctor appointment?"))
	reply := bot.WaitSent(t, 1, 20*time.Second)[0]
	bot.AddUpdate(telegramtest.Reaction(42, models.ChatTypePrivate, reply.MessageID, alice, nil, []string{"👎"}))
	again := bot.WaitSent(t, 2, 20*time.Second)[1]
	// A 👎 on the re-answer: its request is the first 👎, whose chat is
	// known from the message it judged.
	bot.AddUpdate(telegramtest.Reaction(42, models.ChatTypePrivate, again.MessageID, alice, nil, []string{"👎"}))
	bot.WaitSent(t, 3, 20*time.Second)
	reqs := llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("LLM requests = %d; want the answer and its two re-answers", len(reqs))
	}
	for i, r := range reqs {
		if strings.Contains(r.System, "group chat") || !strings.Contains(r.System, "doctor appointment is on Tuesday") {
			t.Fatalf("request %d's system prompt: want no group line and the private memory:\n%s", i, r.System)
		}
	}
}

// TestE2EGroupFollowUpJudgesOnlyTheAskersAnswer: in a group, another
// member's next message is no verdict on the previous answer: Bob's
// "that's wrong" after Alice's answer is answered as his own message
// (his words, no re-answer of Alice's question) and Bob's new question
// records no acceptance of it; Alice's own "no, try again" re-answers
// her question and counts against her answer.
func TestE2EGroupFollowUpJudgesOnlyTheAskersAnswer(t *testing.T) {
	t.Parallel()
	llm, bot, h := numberedAnswers(t)
	alice, bob := telegramtest.User(42, "alice"), telegramtest.User(43, "bob")
	const group = -100889
	mention := "@" + bot.Bot.Username + " "
	ctx := context.Background()
	sent := 0
	say := func(from *models.User, text string) (telegramtest.Sent, *core.Reply) {
		t.Helper()
		bot.AddUpdate(bot.Group(group, from, text, 0))
		sent++
		got := bot.WaitSent(t, sent, 20*time.Second)[sent-1]
		return got, deliveredReply(t, h, "telegram", fmt.Sprintf("%d:%d", group, got.MessageID))
	}
	verdicts := func(rep *core.Reply) []core.Signal {
		t.Helper()
		sigs, err := h.app.db.SignalsForReply(ctx, rep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return sigs
	}

	_, monad := say(alice, mention+"what is a monad?")
	got, _ := say(bob, mention+"that's wrong")
	if r, _ := llm.Last(); llm.Count() != 2 || strings.HasPrefix(got.Text, "↻") || !strings.Contains(r.LastUser(), "that's wrong") {
		t.Fatalf("bob's \"that's wrong\" after alice's answer: %d calls, answered %q to %q; want it answered as his own message", llm.Count(), got.Text, r.LastUser())
	}
	if sigs := verdicts(monad); len(sigs) != 0 {
		t.Fatalf("bob's \"that's wrong\" judged alice's answer: %+v", sigs)
	}

	_, functor := say(alice, mention+"what is a functor?")
	say(bob, mention+"what's the capital of Peru?")
	if sigs := verdicts(functor); len(sigs) != 0 {
		t.Fatalf("bob's new question judged alice's answer: %+v", sigs)
	}

	_, applicative := say(alice, mention+"what is an applicative?")
	calls := llm.Count()
	got, _ = say(alice, mention+"no, try again")
	r, _ := llm.Last()
	if sigs := verdicts(applicative); llm.Count() != calls+1 || !strings.HasPrefix(got.Text, "↻ Answered again") || !strings.Contains(r.LastUser(), "what is an applicative?") ||
		len(sigs) != 1 || sigs[0].Polarity != core.Negative || sigs[0].UserID != "42" {
		t.Fatalf("alice's own \"no, try again\": answered %q to %q, verdicts %+v; want her question answered again and one negative verdict", got.Text, r.LastUser(), sigs)
	}
}
