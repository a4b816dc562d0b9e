package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// pathChats is how many conversations BenchmarkPerfPath's messages take
// turns in (so no history grows long).
const pathChats = 100

// BenchmarkPerfPath runs plain messages of pathChats conversations
// through the App in this process (the fake Bot API polling, the fake LLM answering
// at once), one after another, each until its reply is at the fake: the
// whole path under a CPU profile, which BenchmarkPerfMessage's separate
// process does not give; the platform's pacing is off. cpu-ms/msg counts the fakes too (the HTTP
// servers and their clients' other ends):
//
//	go test -run '^$' -bench PerfPath -benchtime 500x -cpuprofile cpu.out ./cmd/opentalon
//	go tool pprof -top -cum cpu.out
func BenchmarkPerfPath(b *testing.B) {
	llm := providertest.NewOpenAI(b)
	bot := telegramtest.New(b, tgToken)
	cfg := parseConfig(b, testConfig(b.TempDir(), llm.BaseURL(), fmt.Sprintf(`channels:
  console: { enabled: false }
  telegram:
    enabled: true
    token: %q
    api_url: %q
    ack_reaction: ""
`, tgToken, bot.URL)))
	// The platform's pacing off (one chat may get a message a second):
	// the gateway's own cost is measured.
	startAppWith(b, cfg, AppOptions{Telegram: func(o *telegram.Options) { o.SendGap, o.GlobalLimit = -1, -1 }})
	users := make([]*models.User, pathChats)
	for i := range users {
		users[i] = telegramtest.User(int64(50000+i), "")
	}
	n := 0
	send := func() {
		n++
		text := fmt.Sprintf("question %d", n)
		bot.AddUpdate(bot.Private(users[n%pathChats], text))
		if got := bot.WaitSent(b, n, 20*time.Second)[n-1].Text; !strings.Contains(got, "echo: "+text) {
			b.Fatalf("reply %d = %q; want the echo of %q", n, got, text)
		}
	}
	for range pathChats {
		send() // the sessions open
	}
	cpu0 := processCPU()
	for b.Loop() {
		send()
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/msg")
}
