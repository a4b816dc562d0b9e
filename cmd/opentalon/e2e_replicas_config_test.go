package main

// Replicas of one bot whose configs differ (issue 23).

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicasWithDifferentChannels: replica A runs Telegram, replica
// B only Slack, on one PostgreSQL (as during a rolling deploy of a config
// that adds or drops a channel). Every Telegram message A takes in is
// answered on Telegram: B, which cannot send there, leaves them to A
// rather than failing them.
func TestE2EReplicasWithDifferentChannels(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	bin := releaseBinary(t)
	pg := func(y string) string {
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		return insertUnder(y, "queue", "  lease_ttl: 2s\n")
	}
	var procs []*binProc
	for _, y := range []string{
		telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL),
		slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: events\n    signing_secret: s\n    events: { listen: \"127.0.0.1:0\" }\n"),
	} {
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", writeConfig(t, pg(y)), "--log-level", "debug", "run")
		procs = append(procs, p)
		t.Cleanup(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(60 * time.Second)
			if t.Failed() {
				t.Logf("a replica's log:\n%s", tail(p.stderr.String(), 40))
			}
		})
	}
	waitLog(t, procs[0], pollerHeld)
	waitLog(t, procs[1], "Slack Events API endpoint listening")
	var msgs []chatMsg
	for i := range 20 {
		u := bot.Private(telegramtest.User(int64(8000+i%5), ""), "d"+strconv.Itoa(i))
		bot.AddUpdate(u)
		msgs = append(msgs, chatMsg{chat: u.Message.Chat.ID, id: u.Message.ID, text: u.Message.Text})
	}
	waitAnswered(t, bot, msgs, "d", []*lockedBuf{procs[0].stderr, procs[1].stderr}, 30*time.Second)
	if strings.Contains(procs[1].stderr.String(), "is not enabled") {
		t.Errorf("the Slack-only replica took Telegram's messages:\n%s", tail(procs[1].stderr.String(), 20))
	}
}
