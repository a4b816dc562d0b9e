package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2EStopEndsAStreamedAnswer: /stop sent while a long answer streams
// into a Telegram message ends it there: the LLM's request is cut, the
// message keeps what it showed, the bot says it stopped, and the next
// message is answered as usual.
func TestE2EStopEndsAStreamedAnswer(t *testing.T) {
	t.Parallel()
	chunks := words(600, 4) // half a minute at 50 ms a chunk
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if strings.Contains(r.LastUser(), "story") {
			return providertest.Script{Chunks: chunks, ChunkDelay: 50 * time.Millisecond}
		}
		return providertest.Script{Text: "a short answer"}
	})
	bot := telegramtest.New(t, tgToken)
	startAppWith(t, loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))), AppOptions{})
	alice := telegramtest.User(42, "alice")
	bot.AddUpdate(bot.Private(alice, "tell me a long story"))
	bot.WaitSent(t, 1, 20*time.Second) // the stream shows the answer so far

	bot.AddUpdate(bot.Private(alice, "/stop"))
	const stopped = "Stopped. Send a message when you want me to go on."
	bot.WaitFor(t, "the stop's answer", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return len(sent) >= 2 && sent[len(sent)-1].Text == stopped
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := llm.WaitInFlight(ctx, 0); err != nil {
		t.Fatalf("the stopped answer's LLM request still runs: %v", err)
	}
	sent := bot.Sent()
	shown, _ := bot.Text(42, sent[0].MessageID)
	if !strings.HasPrefix(shown, "w0") || strings.Contains(shown, strings.TrimSpace(chunks[len(chunks)-1])) {
		t.Fatalf("the streamed message shows %q; want the beginning of the answer, not its end", shown)
	}

	bot.AddUpdate(bot.Private(alice, "and now?"))
	bot.WaitFor(t, "the next answer", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return len(sent) >= 3 && sent[len(sent)-1].Text == "a short answer"
	})
	if n := llm.Count(); n != 2 {
		t.Fatalf("the LLM was asked %d times; want 2 (the stopped answer is not tried again)", n)
	}
}
