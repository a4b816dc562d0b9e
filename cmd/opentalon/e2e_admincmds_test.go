package main

// /budget through the opentalon binary on the fake Telegram: a
// non-admin's change is refused, an admin's holds for everyone, and it
// outlives a restart of the binary (a setting in the database).

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestE2EBudgetSetByAnAdminOnTelegram(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and stops processes")
	}
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	y := telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)
	y = strings.Replace(y, `listen: "127.0.0.1:0"`, `listen: ""`, 1)
	y = strings.Replace(y, "    api_url:", "    admins: [\"7\"]\n    api_url:", 1)
	y = strings.Replace(y, "routing:\n  primary: fake/small\n", "routing:\n  primary: fake/small\n  budget: { daily_usd: 5 }\n", 1)
	cfg := writeConfig(t, y)
	alice, admin := telegramtest.User(42, "alice"), telegramtest.User(7, "boss")

	// ask sends text from a user and returns the answer in their chat.
	ask := func(from int64, text string) string {
		t.Helper()
		n := len(bot.Sent())
		u := alice
		if from == 7 {
			u = admin
		}
		bot.AddUpdate(bot.Private(u, text))
		sent := bot.WaitSent(t, n+1, 30*time.Second)
		if got := sent[n]; got.ChatID != from {
			t.Fatalf("%q from %d answered in chat %d: %q", text, from, got.ChatID, got.Text)
		}
		return sent[n].Text
	}
	p := startBinary(t, nil, "--config", cfg, "--log-level", "warn", "run")
	if got := ask(42, "/help"); !strings.Contains(got, "\n/budget [daily|chat ") || !strings.Contains(got, "\n/allowed [add|remove ") {
		t.Fatalf("/help = %q; want /budget and /allowed listed", got)
	}
	if got := ask(42, "/allowed"); got != "/model may pick any model of the catalog (routing.allowed)." {
		t.Fatalf("/allowed = %q; want any model", got)
	}
	if got := ask(42, "/budget"); !strings.Contains(got, "Today (UTC): $0.00 of $5.00 (routing.budget.daily_usd)") {
		t.Fatalf("/budget = %q; want the config's $5.00", got)
	}
	if got, want := ask(42, "/budget daily 1"), "Only an admin of this telegram bot can change the budget."; got != want {
		t.Fatalf("alice's /budget daily 1 = %q; want %q", got, want)
	}
	if got := ask(42, "/budget"); !strings.Contains(got, "of $5.00 (routing.budget.daily_usd)") {
		t.Fatalf("/budget after alice's refused change = %q; want the config's $5.00", got)
	}
	if got := ask(7, "/budget daily 1"); !strings.Contains(got, "daily budget is now $1.00") {
		t.Fatalf("the admin's /budget daily 1 = %q", got)
	}
	const setByAdmin = "of $1.00 (routing.budget.daily_usd, set in chat by telegram:7"
	if got := ask(42, "/budget"); !strings.Contains(got, setByAdmin) {
		t.Fatalf("/budget after the admin's change = %q; want %q", got, setByAdmin)
	}
	if calls := llm.Count(); calls != 0 {
		t.Fatalf("the commands made %d LLM calls", calls)
	}

	// A restart keeps it: the setting is in the database.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr.String())
	}
	p = startBinary(t, nil, "--config", cfg, "--log-level", "warn", "run")
	if got := ask(42, "/budget"); !strings.Contains(got, setByAdmin) {
		t.Fatalf("/budget after a restart = %q; want %q", got, setByAdmin)
	}
	if got := ask(7, "/budget default"); !strings.Contains(got, "Back to the config's budgets") {
		t.Fatalf("the admin's /budget default = %q", got)
	}
	if got := ask(42, "/budget"); !strings.Contains(got, "of $5.00 (routing.budget.daily_usd);") {
		t.Fatalf("/budget after /budget default = %q; want the config's $5.00", got)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr.String())
	}
}
