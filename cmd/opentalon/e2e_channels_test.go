package main

// The channel wiring through the whole App: several channels at once, a
// channel that fails while another answers, disabled channels.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// consoleAndTelegram is telegramConfig with the console on as well.
func consoleAndTelegram(dataDir, llmURL, botURL string) string {
	return strings.Replace(telegramConfig(dataDir, llmURL, botURL), "console: { enabled: false }", "console: { enabled: true }", 1)
}

// TestE2EConsoleEOFDoesNotStopOtherChannels: with the console and
// Telegram on, the end of the console's input ends nothing: Telegram keeps
// answering.
func TestE2EConsoleEOFDoesNotStopOtherChannels(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, consoleAndTelegram(t.TempDir(), llm.BaseURL(), bot.URL))))
	h.send("from the console")
	h.expect("echo: from the console")
	h.in.Close() // Ctrl-D
	alice := telegramtest.User(42, "alice")
	for i := range 3 {
		bot.AddUpdate(bot.Private(alice, fmt.Sprintf("still there? %d", i)))
		got := bot.WaitSent(t, i+1, 20*time.Second)[i]
		if !strings.Contains(got.Text, fmt.Sprintf("echo: still there? %d", i)) {
			t.Fatalf("telegram answered %q", got.Text)
		}
		time.Sleep(50 * time.Millisecond) // give a wrongly stopping run the time to stop
	}
	select {
	case err := <-h.done:
		t.Fatalf("the app stopped (%v) although Telegram is enabled", err)
	default:
	}
}

// TestE2EDisabledChannelModelDoesNotFailStartUp: the model of a disabled
// channel is neither checked nor handed to the router.
func TestE2EDisabledChannelModelDoesNotFailStartUp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	y := testConfig(t.TempDir(), llm.BaseURL(), `channels:
  telegram:
    enabled: false
    model: nosuch/model
    models: { "42": other/model }
`)
	h := startApp(t, loadConfigFile(t, writeConfig(t, y)))
	h.send("hello")
	h.expect("echo: hello")
}

// TestE2EFailingChannelRestartedAndReported: Telegram's start fails
// (getMe answers 500) and is retried with backoff; meanwhile /readyz
// names it and the console answers; once getMe works it connects.
func TestE2EFailingChannelRestartedAndReported(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	for range 2 {
		bot.Fail("getMe", telegramtest.Failure{Code: 500, Description: "Internal Server Error"})
	}
	h := startApp(t, loadConfigFile(t, writeConfig(t, consoleAndTelegram(t.TempDir(), llm.BaseURL(), bot.URL))))
	addr := waitAddr(t, h.app)
	bot.WaitFor(t, "the first failed getMe", 20*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		return len(bot.Calls("getMe")) >= 1
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(t, "http://"+addr+"/readyz")
		if code == 503 && strings.Contains(body, "channel telegram") && strings.Contains(body, "restarting") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q; want 503 naming the telegram channel being restarted", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.send("console still answers")
	h.expect("echo: console still answers")
	// The third getMe works: Telegram connects and answers.
	bot.AddUpdate(bot.Private(telegramtest.User(42, "alice"), "and telegram?"))
	if got := bot.WaitSent(t, 1, 30*time.Second)[0]; !strings.Contains(got.Text, "echo: and telegram?") {
		t.Fatalf("telegram answered %q", got.Text)
	}
	if n := len(bot.Calls("getMe")); n != 3 {
		t.Fatalf("getMe called %d times, want 3 (two failures, one success)", n)
	}
}

// TestOpenChannelWarnsAtStart (issue 9, finding 12): a platform channel
// with no allowlist is named once in a start-up warning.
func TestOpenChannelWarnsAtStart(t *testing.T) {
	t.Parallel()
	var logs lockedBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, tt := range []struct {
		extra string
		warn  bool
	}{
		{"", true},
		{"    allow_users: [\"42\"]\n", false},
		{"    access: pairing\n    admins: [\"7\"]\n", false},
	} {
		logs.Reset()
		y := strings.Replace(telegramConfig(t.TempDir(), "http://127.0.0.1:1", "http://127.0.0.1:1"), "    api_url:", tt.extra+"    api_url:", 1)
		cfg := loadConfigFile(t, writeConfig(t, y))
		seedDB(t, cfg.State.DataDir)
		app, err := BuildApp(context.Background(), cfg, AppOptions{Logger: log, Stdin: strings.NewReader(""), Stdout: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		app.Close()
		got := strings.Count(logs.String(), "channels.telegram is open to everyone")
		if tt.warn && (got != 1 || !strings.Contains(logs.String(), "channels.telegram.allow_users")) || !tt.warn && got != 0 {
			t.Errorf("allowlist %q: %d warnings in\n%s", tt.extra, got, logs.String())
		}
	}
}
