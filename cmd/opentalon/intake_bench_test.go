package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// intakeBurst is how many messages, each from its own chat, one burst of
// BenchmarkPerfIntake brings.
const intakeBurst = 200

// BenchmarkPerfIntake measures how fast Telegram polling takes a burst
// in: intakeBurst messages from as many chats are waiting at the fake Bot
// API, and each iteration lasts until the offset confirmed to it is past
// the last of them — every one committed to the queue (fsync'd) before
// it was acknowledged. The LLM answers after 2 s, so the answers do not
// compete with the intake. It reports intake-msg/s:
//
//	go test -run '^$' -bench PerfIntake ./cmd/opentalon
func BenchmarkPerfIntake(b *testing.B) {
	llm := providertest.NewOpenAI(b)
	llm.SetReply(func(rec providertest.Received) providertest.Script {
		time.Sleep(2 * time.Second)
		return providertest.Echo(rec)
	})
	tg := telegramtest.New(b, perfToken)
	yaml := testConfig(b.TempDir(), llm.BaseURL(), fmt.Sprintf(`channels:
  console: { enabled: false }
  telegram:
    enabled: true
    token: %q
    api_url: %q
    ack_reaction: ""
queue:
  workers: 2000
llm:
  max_concurrent_cloud: 2000
`, perfToken, tg.URL))
	path := b.TempDir() + "/config.yaml"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := loadConfigFile(b, path)
	defer runBenchApp(b, cfg, AppOptions{Telegram: func(o *telegram.Options) {
		o.SendGap, o.GlobalLimit = -1, -1
	}})()
	users := make([]*models.User, intakeBurst)
	for i := range users {
		users[i] = telegramtest.User(int64(30000+i), "")
	}
	var took time.Duration
	round := 0
	for b.Loop() {
		round++
		var last int64
		t0 := time.Now()
		for i, u := range users {
			last = tg.AddUpdate(tg.Private(u, fmt.Sprintf("burst %d %d", round, i)))
		}
		for tg.Confirmed() <= last {
			time.Sleep(100 * time.Microsecond)
		}
		took += time.Since(t0)
	}
	b.ReportMetric(float64(intakeBurst*b.N)/took.Seconds(), "intake-msg/s")
}
