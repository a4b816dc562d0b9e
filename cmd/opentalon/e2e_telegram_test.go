package main

// Telegram through the whole App: config keys of issue 3, the fake Bot API
// (real wire format, driven through go-telegram/bot) and the fake LLM.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

const tgToken = "123456:tg-SECRET-token-value"

// telegramConfig is testConfig with the console off, Telegram on against
// the fake Bot API and the HTTP server on a free port.
func telegramConfig(dataDir, llmURL, botURL string) string {
	y := testConfig(dataDir, llmURL, fmt.Sprintf(`channels:
  console: { enabled: false }
  telegram:
    enabled: true
    token: %q
    api_url: %q
`, tgToken, botURL))
	return strings.Replace(y, `listen: ""`, `listen: "127.0.0.1:0"`, 1)
}

func TestE2ETelegramThroughApp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	dir := t.TempDir()
	cfgPath := writeConfig(t, telegramConfig(dir, llm.BaseURL(), bot.URL))
	h := startApp(t, loadConfigFile(t, cfgPath))
	addr := waitAddr(t, h.app)
	ctx := context.Background()
	alice := telegramtest.User(42, "alice")

	// A private message is answered by the LLM, quoting the question.
	in := bot.Private(alice, "hello from telegram")
	bot.AddUpdate(in)
	sent := bot.WaitSent(t, 1, 20*time.Second)
	reply := sent[0]
	if reply.ChatID != 42 || reply.ReplyTo != in.Message.ID || !strings.Contains(reply.Text, "echo: hello from telegram") {
		t.Fatalf("reply = %+v; want the LLM's echo in chat 42 quoting message %d", reply, in.Message.ID)
	}
	if r, _ := llm.Last(); r.LastUser() != "hello from telegram" || r.APIKey != "test-key" {
		t.Fatalf("LLM saw %q with key %q", r.LastUser(), r.APIKey)
	}

	// /model@bot in a group and /status are answered by core, not the LLM.
	calls := llm.Count()
	bot.AddUpdate(bot.Group(-100777, alice, "/model@"+bot.Bot.Username, 0))
	sent = bot.WaitSent(t, 2, 20*time.Second)
	if got := sent[1]; got.ChatID != -100777 || !strings.Contains(got.Text, "fake/small") {
		t.Fatalf("/model@%s answered %+v; want the model in use in the group", bot.Bot.Username, got)
	}
	bot.AddUpdate(bot.Private(alice, "/status"))
	sent = bot.WaitSent(t, 3, 20*time.Second)
	if got := sent[2]; got.ChatID != 42 || !strings.Contains(got.Text, "Model:") || !strings.Contains(got.Text, "telegram: last update") {
		t.Fatalf("/status answered %+v; want the status with the time of the last update", got)
	}
	if n := llm.Count(); n != calls {
		t.Fatalf("commands reached the LLM: %d calls, want %d", n, calls)
	}

	// 👎 on the bot's reply becomes a negative signal for that reply's model.
	bot.AddUpdate(telegramtest.Reaction(42, models.ChatTypePrivate, reply.MessageID, alice, nil, []string{"👎"}))
	rep := deliveredReply(t, h, "telegram", fmt.Sprintf("42:%d", reply.MessageID))
	var err error
	var sigs []core.Signal
	deadline := time.Now().Add(20 * time.Second)
	for len(sigs) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if sigs, err = h.app.db.SignalsForReply(ctx, rep.ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(sigs) != 1 || sigs[0].Polarity != core.Negative || sigs[0].Model != "fake/small" || sigs[0].Kind != core.SignalReaction {
		t.Fatalf("signals for reply %d = %+v; want one negative reaction on fake/small", rep.ID, sigs)
	}

	// The CLI sees the learned rejection while the gateway runs.
	res := runMain(t, nil, "", "--config", cfgPath, "affinity", "show", "--json")
	if res.code != 0 {
		t.Fatalf("affinity show exit %d: %s", res.code, res.stderr)
	}
	var rows []struct {
		Model    string `json:"model"`
		Negative int    `json:"negative"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rows); err != nil {
		t.Fatalf("affinity show --json: %v\n%s", err, res.stdout)
	}
	found := false
	for _, r := range rows {
		found = found || (r.Model == "fake/small" && r.Negative >= 1)
	}
	if !found {
		t.Fatalf("affinity show --json = %s; want a negative for fake/small", res.stdout)
	}

	// Ready while polling works.
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %q; want 200 while polling works", code, body)
	}
}
