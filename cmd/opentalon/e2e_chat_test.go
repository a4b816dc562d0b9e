package main

// What a user reads in chat (issue 26, item 12): /retry with one model,
// the give-up message's tool names, /retry on Slack, and a streamed
// answer whose final edit fails.

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestRetryWithOneModelSaysSo(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	h := startApp(t, loadConfigFile(t, writeConfig(t, testConfig(t.TempDir(), llm.BaseURL(), ""))))
	h.send("hello")
	h.expect("echo: hello")
	h.send("/retry")
	note := h.next()
	if !strings.Contains(note, "Answered again by fake/small, the only model available now") || strings.Contains(note, "was rejected") {
		t.Fatalf("/retry with one model: %q", note)
	}
}

func TestGiveUpNamesBuiltInToolsPlainly(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	// The model keeps saving a memory and never answers.
	llm.SetReply(func(r providertest.Received) providertest.Script {
		for _, tool := range r.Tools {
			if tool.Action == "memory_save" {
				return providertest.Script{ToolCalls: []core.ToolCall{{Plugin: tool.Plugin, Action: tool.Action, Args: map[string]string{"text": "likes tea"}}}}
			}
		}
		return providertest.Script{Text: "no memory tool offered"}
	})
	h := startApp(t, loadConfigFile(t, writeConfig(t, testConfig(t.TempDir(), llm.BaseURL(), "orchestrator: { max_steps: 2 }\n"))))
	h.send("remember that I like tea")
	var got []string
	for l := h.next(); ; l = h.next() {
		got = append(got, l)
		if strings.HasPrefix(l, "Tools used:") {
			break
		}
	}
	text := strings.Join(got, "\n")
	if !strings.Contains(text, "stopped after 2 steps") || !strings.HasSuffix(text, "Tools used: memory_save.") {
		t.Fatalf("give-up message:\n%s", text)
	}
}

// On Slack, /retry's answer is posted in the conversation like any reply:
// it stays, and a reaction on it reaches the router.
func TestSlackRetryAnswersInTheConversation(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	y := strings.Replace(slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    streaming: off\n"),
		"    fake/small: { alias: small, weight: 80, context_window: 8000 }",
		"    fake/small: { alias: small, weight: 80, context_window: 8000 }\n    fake/big: { alias: big, weight: 20 }", 1)
	h := startApp(t, loadConfigFile(t, writeConfig(t, y)))
	srv.WaitConnected(t, 1, 20*time.Second)
	dm := slacktest.DMChannel("alice")
	srv.Deliver(srv.DM("alice", "what is up", ""))
	first := srv.WaitPosts(t, 1, 20*time.Second)[0]
	if first.Text != "answer from small" {
		t.Fatalf("first answer %+v", first)
	}
	srv.Deliver(srv.Slash("alice", dm, "/retry", ""))
	posts := srv.WaitPosts(t, 2, 20*time.Second)
	again := posts[1]
	if again.Channel != dm || !strings.Contains(again.Text, "answer from big") || !strings.Contains(again.Text, "Answered again by fake/big") {
		t.Fatalf("/retry answer %+v; want it posted in %s", again, dm)
	}
	if e := srv.Ephemerals(); len(e) != 0 {
		t.Fatalf("/retry answered ephemerally: %+v", e)
	}
	// The re-answer is a reply like any other: a reaction maps to it.
	rep := deliveredReply(t, h, "slack", again.Channel+":"+again.TS)
	if rep.Model != "fake/big" {
		t.Fatalf("reply of the re-answer: %+v", rep)
	}
	// Other slash commands stay ephemeral.
	srv.Deliver(srv.Slash("alice", dm, "/model", ""))
	srv.WaitFor(t, "the /model answer", 20*time.Second, func() bool { return len(srv.Ephemerals()) == 1 })
}

// A streamed answer whose final edit the platform fails (not a bad
// request) is finished by sending the part anew; the cut-off message is
// deleted.
func TestStreamFinalEditFailureSendsTheRest(t *testing.T) {
	chunks := words(40, 4)
	llm := streamingLLM(t, chunks, 50*time.Millisecond)
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))))
	alice := telegramtest.User(44, "alice")
	bot.AddUpdate(bot.Private(alice, "stream something"))
	// Once the stream opened its message, every edit fails: Telegram
	// answers 502.
	first := bot.WaitSent(t, 1, 20*time.Second)[0]
	for range 50 {
		bot.Fail("editMessageText", telegramtest.Failure{Code: 502, Description: "Bad Gateway"})
	}
	want := textfmt.SplitHTML(textfmt.ToTelegramHTML(strings.Join(chunks, "")), telegram.MaxMessage)[0]
	bot.WaitFor(t, "the full answer sent anew", 30*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		for _, s := range sent[1:] {
			if t, _ := bot.Text(44, s.MessageID); t == want {
				return true
			}
		}
		return false
	})
	sent := bot.Sent()
	last := sent[len(sent)-1]
	r := storedReply(t, h, 44, last.MessageID)
	if r.Text != strings.Join(chunks, "") {
		t.Fatalf("stored reply %q", r.Text)
	}
	if _, ok := bot.Text(44, first.MessageID); ok {
		t.Errorf("the cut-off message %d is still there", first.MessageID)
	}
	for _, s := range sent {
		if text, _ := bot.Text(44, s.MessageID); strings.HasPrefix(text, "Sorry") {
			t.Errorf("the user got an apology: %q", text)
		}
	}
}

// TestRetryAfterAnApologyTriesTheFailedMessage: a message given up with
// an apology is what /retry answers next, as it was asked, and the answer
// before it is not judged. /retry re-answered the question before it
// with the next model and recorded a rejection of the model that had
// answered that one well.
func TestRetryAfterAnApologyTriesTheFailedMessage(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	var broken atomic.Bool
	broken.Store(true)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if r.LastUser() == "second question" && broken.Load() {
			return providertest.Script{Body: "this is not json"}
		}
		return providertest.Script{Text: "answer from " + r.Model + " to " + r.LastUser()}
	})
	h := startApp(t, loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), ""))))
	h.send("first question")
	h.expect("answer from small to first question")
	h.send("second question")
	if got := h.next(); !strings.HasPrefix(got, "Sorry, I could not answer that") {
		t.Fatalf("reply = %q; want the apology", got)
	}
	broken.Store(false)
	h.send("/retry")
	got := h.readUntil("to second question")
	if !strings.Contains(got, "↻ Trying again: “second question”") || !strings.Contains(got, "answer from small to second question") || strings.Contains(got, "rejected") {
		t.Fatalf("/retry after the apology = %q; want the failed message answered again by the usual model", got)
	}
	affs, err := h.app.db.Affinities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range affs {
		if a.Negatives > 0 {
			t.Fatalf("affinity %+v; /retry after an apology rejected nothing", a)
		}
	}
	// Once answered, /retry is a verdict on that answer again.
	h.send("/retry")
	if got := h.readUntil("to second question"); !strings.Contains(got, "answer from big") || !strings.Contains(got, "fake/small was rejected") {
		t.Fatalf("the next /retry = %q; want the second question re-answered by the next model", got)
	}
}
