package main

// Discord on replicas of one bot (issue 23): one replica holds the
// gateway shard's lease and its websocket; a kill -9 of it hands the
// session to another, which resumes it.

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2EReplicasDiscordShardThroughAKill: two replicas of a Discord bot
// (one shard) on one PostgreSQL. The one holding the shard is killed with
// SIGKILL after three messages were answered; two messages come while no
// one is connected. The other replica takes the shard's lease, resumes
// the session (Discord replays what it missed, and what the dead holder
// took after its last saved sequence), and every message is answered
// once, replying to it.
func TestE2EReplicasDiscordShardThroughAKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two processes and kills one")
	}
	dsn := pgtest.DSN(t)
	llm := providertest.NewOpenAI(t)
	dc := discordtest.New(t, dcToken)
	guild := dc.Guild()
	channel := dc.TextChannel(guild)
	bin := releaseBinary(t)
	start := func() *binProc {
		y := discordConfig(t.TempDir(), llm.BaseURL(), dc.URL+"/api/v10", fmt.Sprintf("    allow_guilds: [%q]\n", guild))
		y = insertUnder(y, "state", fmt.Sprintf("  driver: postgres\n  postgres: { dsn: %q }\n", dsn))
		y = insertUnder(y, "queue", "  lease_ttl: 2s\n")
		y = insertUnder(y, "cluster", "  lease_ttl: 2s\n")
		p := startBinaryAt(t, bin, childEnv(), nil, "--config", writeConfig(t, y), "--log-level", "debug", "run")
		t.Cleanup(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			p.exitCode(60 * time.Second)
			if t.Failed() {
				t.Logf("a replica's log:\n%s", tail(p.stderr.String(), 60))
			}
		})
		return p
	}
	const holding = "running Discord shard"
	a := start()
	waitLog(t, a, holding)
	b := start()
	waitLog(t, b, "campaigning for the Discord shards' leases")

	alice := dc.User("alice")
	var ids []string
	say := func(text string) {
		ids = append(ids, dc.Message(t, discordtest.Msg{Channel: channel, Guild: guild, Author: alice,
			Content: discordtest.Mention(dc.Bot) + " " + text, Mentions: []discordtest.User{dc.Bot}}))
	}
	answered := func(n int) func() bool {
		return func() bool {
			got := map[string]bool{}
			for _, s := range dc.Sent() {
				got[s.ReplyTo] = true
			}
			for _, id := range ids[:n] {
				if !got[id] {
					return false
				}
			}
			return true
		}
	}
	for i := range 3 {
		say(fmt.Sprintf("message %d", i))
	}
	dc.WaitFor(t, "the first three answered", answered(3))
	// Recorded done (by either replica) before the kill: an answer sent
	// just before a kill may be sent again (the crash loop's documented
	// window), which is not what this test is about.
	for deadline := time.Now().Add(30 * time.Second); strings.Count(a.stderr.String()+b.stderr.String(), "request done") < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first three answers are not recorded done")
		}
	}
	resumed := dc.Resumes()

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.exitCode(30 * time.Second)
	dc.DispatchOffline(true)
	say("message 3, sent while no replica is connected")
	say("message 4, also in the gap")
	dc.DispatchOffline(false)
	waitLog(t, b, holding)
	dc.WaitFor(t, "every message answered", answered(len(ids)))
	if dc.Resumes() == resumed {
		t.Errorf("the replica that took the shard over did not resume its session (identifies: %+v)", dc.Identifies())
	}
	// No second answer comes: the LLM is idle and nothing is queued.
	for deadline := time.Now().Add(30 * time.Second); llm.InFlight() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the LLM is still asked")
		}
	}
	count := map[string]int{}
	for _, s := range dc.Sent() {
		count[s.ReplyTo]++
		if s.ChannelID != channel {
			t.Errorf("an answer went to channel %s", s.ChannelID)
		}
	}
	for i, id := range ids {
		if count[id] != 1 {
			t.Errorf("message %d was answered %d times; want once", i, count[id])
		}
	}
	if len(dc.Sent()) != len(ids) {
		t.Errorf("%d messages sent for %d asked", len(dc.Sent()), len(ids))
	}
}
