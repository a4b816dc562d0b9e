package main

// How the binary finds and uses its config (issue 2) and the Telegram
// config keys beyond the basics (issues 3 and 4): the embedded default
// from the environment, $OPENTALON_CONFIG, webhook mode, per-chat models
// and the command menu.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestE2EDefaultConfigFromEnvironment(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	home := t.TempDir()

	// Nothing configured: the error names what to set.
	res := runMain(t, map[string]string{"HOME": home}, "", "complete", "hi")
	if res.code == 0 {
		t.Fatalf("complete without any config or provider variable succeeded: %q", res.stdout)
	}
	for _, want := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("error %q does not mention %s", res.stderr, want)
		}
	}

	// OPENAI_BASE_URL alone (an OpenAI-compatible server, no key) is enough,
	// for complete and for the console, with the data under ~/.opentalon.
	// The default's server listens on $OPENTALON_LISTEN (127.0.0.1:7070
	// when unset, which another process may hold): a free port here.
	env := map[string]string{"HOME": home, "OPENAI_BASE_URL": llm.BaseURL(), "OPENTALON_LISTEN": "127.0.0.1:0"}
	res = runMain(t, env, "", "complete", "hi there")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "echo: hi there" {
		t.Fatalf("default config complete: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	res = runMain(t, env, "hello console\n", "--log-level", "error")
	if res.code != 0 || res.stdout != "echo: hello console\n" {
		t.Fatalf("default config console: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".opentalon", "opentalon.db")); err != nil {
		t.Fatalf("default data dir: %v", err)
	}

	// $OPENTALON_CONFIG names the file when --config is absent.
	other := providertest.NewOpenAI(t)
	other.SetReply(modelReply)
	path := writeConfig(t, twoModelConfig(t.TempDir(), other.BaseURL(), ""))
	env["OPENTALON_CONFIG"] = path
	res = runMain(t, env, "", "complete", "--model", "small", "which?")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "answer from small" {
		t.Fatalf("$OPENTALON_CONFIG: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	// --log-format json gives JSON log lines, given before or after the
	// subcommand as the usage says of every global flag.
	for _, args := range [][]string{
		{"--log-format", "json", "complete", "hi"},
		{"complete", "--log-format", "json", "hi"},
		{"complete", "hi", "--log-format=json"},
	} {
		res = runMain(t, env, "", args...)
		first, _, _ := strings.Cut(strings.TrimSpace(res.stderr), "\n")
		var line map[string]any
		if res.code != 0 || json.Unmarshal([]byte(first), &line) != nil || line["msg"] == nil {
			t.Fatalf("%q: exit %d, first log line %q", args, res.code, first)
		}
	}
}

func TestE2ETelegramWebhookAndPerChatModel(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	bot := telegramtest.New(t, tgToken)
	y := twoModelConfig(t.TempDir(), llm.BaseURL(), fmt.Sprintf(`channels:
  console: { enabled: false }
  telegram:
    enabled: true
    token: %q
    api_url: %q
    mode: webhook
    webhook: { listen: "127.0.0.1:0", url: "https://bot.example.com/telegram", secret: "hook-SECRET" }
    models: { "42": big }
`, tgToken, bot.URL))
	h := startApp(t, loadConfigFile(t, writeConfig(t, y)))
	var tg *telegram.Bot
	for _, ch := range h.app.gateway.Channels() {
		if b, ok := ch.(*telegram.Bot); ok {
			tg = b
		}
	}
	if tg == nil {
		t.Fatal("no Telegram channel in the gateway")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, err := tg.WebhookAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bot.WaitFor(t, "setWebhook", 20*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "setWebhook" {
				return true
			}
		}
		return false
	})
	if url, secret := bot.Webhook(); url != "https://bot.example.com/telegram" || secret != "hook-SECRET" {
		t.Fatalf("setWebhook(%q, %q); want the configured url and secret", url, secret)
	}
	hook := "http://" + addr.String() + "/telegram"
	alice := telegramtest.User(42, "alice")
	carol := telegramtest.User(77, "carol")
	post := func(u models.Update, secret string) int {
		b, _ := json.Marshal(u)
		code, _ := postJSON(t, hook, string(b), map[string]string{"X-Telegram-Bot-Api-Secret-Token": secret})
		return code
	}
	if code := post(bot.Private(alice, "sneaky"), "wrong"); code != 401 {
		t.Fatalf("webhook with a wrong secret = %d; want 401", code)
	}
	if code := post(bot.Private(alice, "who answers me?"), "hook-SECRET"); code != 200 {
		t.Fatalf("webhook with the secret = %d; want 200", code)
	}
	// channels.telegram.models pins chat 42 to big; other chats use the weights.
	if got := bot.WaitSent(t, 1, 20*time.Second)[0]; got.ChatID != 42 || !strings.Contains(got.Text, "answer from big") {
		t.Fatalf("chat 42 answered %+v; want big (channels.telegram.models)", got)
	}
	if code := post(bot.Private(carol, "and me?"), "hook-SECRET"); code != 200 {
		t.Fatalf("webhook = %d", code)
	}
	if got := bot.WaitSent(t, 2, 20*time.Second)[1]; got.ChatID != 77 || !strings.Contains(got.Text, "answer from small") {
		t.Fatalf("chat 77 answered %+v; want small", got)
	}
	for _, r := range llm.Requests() {
		if strings.Contains(r.LastUser(), "sneaky") {
			t.Fatal("an update with a wrong secret reached the LLM")
		}
	}

	// The command menu lists core's commands.
	calls := bot.Calls("setMyCommands")
	if len(calls) == 0 {
		t.Fatal("setMyCommands never called")
	}
	for _, c := range []string{"model", "models", "new", "status", "help", "retry", "budget", "allowed"} {
		if !strings.Contains(calls[0].Params["commands"], `"command":"`+c+`"`) {
			t.Errorf("setMyCommands %s lacks /%s", calls[0].Params["commands"], c)
		}
	}
}
