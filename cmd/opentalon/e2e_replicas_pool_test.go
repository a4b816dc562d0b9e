package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicaSmallPoolUnderABurst: one replica on the smallest pools
// (state.postgres.pool_size 1 and 2: one query connection beside the
// listener's) with several queue workers and LLM calls in parallel, under
// a burst of messages from many chats. No request waits for a second
// connection while holding the only one: every message is answered, once.
func TestE2EReplicaSmallPoolUnderABurst(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a burst through a running process")
	}
	for _, size := range []int{1, 2} {
		t.Run(fmt.Sprintf("pool_size_%d", size), func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.DSN(t)
			llm := providertest.NewOpenAI(t)
			bot := telegramtest.New(t, tgToken)
			y := visionCatalog(telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL))
			y = strings.Replace(y, "api_key: test-key", "api_key: test-key\n      local: false", 1)
			y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q, pool_size: %d }\n", dsn, size))
			y = insertUnder(y, "queue", "  lease_ttl: 2s\n  workers: 8\n")
			p := startBinary(t, nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
			waitLog(t, p, pollerHeld)
			var msgs []chatMsg
			for i := range 60 {
				u := bot.Private(telegramtest.User(int64(9000+i%20), ""), "b"+strconv.Itoa(i))
				bot.AddUpdate(u)
				msgs = append(msgs, chatMsg{chat: u.Message.Chat.ID, id: u.Message.ID, text: u.Message.Text})
			}
			waitAnswered(t, bot, msgs, "b", []*lockedBuf{p.stderr}, 90*time.Second)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.exitCode(60 * time.Second); code != 0 {
				t.Errorf("exit code %d after SIGTERM; log:\n%s", code, tail(p.stderr.String(), 40))
			}
			checkAnswers(t, bot, msgs, func(a, b telegramtest.Sent) bool { return false })
			if strings.Contains(p.stderr.String(), "counts as local") {
				t.Errorf("the provider counted as local: the LLM calls ran one at a time, and the pool saw no burst")
			}
		})
	}
}
