package main

// Access control through the whole App on the fake Telegram: pairing from
// the first message to the first answer, admin-only commands, and the
// `opentalon pair` CLI beside the running gateway.

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

var pairCodeRE = regexp.MustCompile(`pairing code is ([A-Z0-9]{8})`)

func TestE2EPairingOnTelegram(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	y := strings.Replace(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL), "    api_url:",
		"    access: pairing\n    admins: [\"7\"]\n    allow_users: [\"99\"]\n    api_url:", 1)
	cfgPath := writeConfig(t, y)
	h := startApp(t, loadConfigFile(t, cfgPath))
	waitAddr(t, h.app)
	alice, admin, carol, dave := telegramtest.User(42, "alice"), telegramtest.User(7, "boss"), telegramtest.User(99, "carol"), telegramtest.User(55, "dave")

	// An unknown user gets a code and nothing reaches the LLM.
	bot.AddUpdate(bot.Private(alice, "what is 2+2?"))
	sent := bot.WaitSent(t, 1, 20*time.Second)
	m := pairCodeRE.FindStringSubmatch(sent[0].Text)
	if sent[0].ChatID != 42 || m == nil {
		t.Fatalf("alice got %+v; want her pairing code", sent[0])
	}
	code := m[1]
	if n := llm.Count(); n != 0 {
		t.Fatalf("the LLM got %d calls from an unpaired user", n)
	}

	// The CLI lists the request while the gateway runs.
	res := runMain(t, nil, "", "--config", cfgPath, "pair", "list")
	if res.code != 0 || !strings.Contains(res.stdout, code) || !strings.Contains(res.stdout, "pending") || !strings.Contains(res.stdout, "@alice") {
		t.Fatalf("pair list exit %d:\n%s%s", res.code, res.stdout, res.stderr)
	}

	// A user approved from the start is answered, but is no admin.
	bot.AddUpdate(bot.Private(carol, "/pair approve "+code))
	sent = bot.WaitSent(t, 2, 20*time.Second)
	if got := sent[1]; got.ChatID != 99 || got.Text != "Only an admin of this telegram bot can use /pair." {
		t.Fatalf("carol's /pair answered %+v; want the one-sentence refusal", got)
	}

	// The admin approves in chat; alice is told and then answered.
	bot.AddUpdate(bot.Private(admin, "/pair approve "+code))
	bot.WaitFor(t, "the approval and alice's notice", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		var toAdmin, toAlice bool
		for _, s := range sent[2:] {
			toAdmin = toAdmin || s.ChatID == 7 && strings.Contains(s.Text, "Approved @alice")
			toAlice = toAlice || s.ChatID == 42 && strings.Contains(s.Text, "approved you")
		}
		return toAdmin && toAlice
	})
	bot.AddUpdate(bot.Private(alice, "what is 2+2?"))
	bot.WaitFor(t, "alice's answer", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		last := sent[len(sent)-1]
		return last.ChatID == 42 && strings.Contains(last.Text, "echo: what is 2+2?")
	})
	if n := llm.Count(); n != 1 {
		t.Fatalf("LLM calls = %d; want alice's one question after approval", n)
	}

	// Another stranger is denied from the CLI and then ignored.
	bot.AddUpdate(bot.Private(dave, "hi"))
	var daveCode string
	bot.WaitFor(t, "dave's code", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		if m := pairCodeRE.FindStringSubmatch(sent[len(sent)-1].Text); m != nil && sent[len(sent)-1].ChatID == 55 {
			daveCode = m[1]
		}
		return daveCode != ""
	})
	if res := runMain(t, nil, "", "--config", cfgPath, "pair", "deny", daveCode); res.code != 0 || !strings.Contains(res.stdout, "denied telegram user 55") {
		t.Fatalf("pair deny exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	before := len(bot.Sent())
	bot.AddUpdate(bot.Private(dave, "hello again"))
	bot.AddUpdate(bot.Private(carol, "ping"))
	bot.WaitFor(t, "carol's answer", 20*time.Second, func(sent []telegramtest.Sent, _ []telegramtest.Call) bool {
		return strings.Contains(sent[len(sent)-1].Text, "echo: ping")
	})
	for _, s := range bot.Sent()[before:] {
		if s.ChatID == 55 {
			t.Fatalf("a denied user got %q", s.Text)
		}
	}
	if res := runMain(t, nil, "", "--config", cfgPath, "pair", "approve", "NOSUCH22"); res.code != 1 || !strings.Contains(res.stderr, "no pairing request with code NOSUCH22") {
		t.Fatalf("approving an unknown code: exit %d %q", res.code, res.stderr)
	}
}
