package main

// Discord through the whole App: the config keys of issue 11, the fake
// Discord (REST and gateway websocket, driven through discordgo) and the
// fake LLM.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

const dcToken = "MTEx.dc.SECRET-discord-token"

// discordConfig is testConfig with the console off, Discord on against
// the fake and the HTTP server on a free port.
func discordConfig(dataDir, llmURL, apiURL, extra string) string {
	y := testConfig(dataDir, llmURL, fmt.Sprintf(`channels:
  console: { enabled: false }
  discord:
    enabled: true
    token: %q
    api_url: %q
    register_commands: true
%s`, dcToken, apiURL, extra))
	return strings.Replace(y, `listen: ""`, `listen: "127.0.0.1:0"`, 1)
}

func TestE2EDiscordThroughApp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	dc := discordtest.New(t, dcToken)
	guild := dc.Guild()
	ch := dc.TextChannel(guild)
	cfgPath := writeConfig(t, discordConfig(t.TempDir(), llm.BaseURL(), dc.URL+"/api/v10", fmt.Sprintf("    allow_guilds: [%q]\n", guild)))
	h := startApp(t, loadConfigFile(t, cfgPath))
	addr := waitAddr(t, h.app)
	alice := dc.User("alice")

	// A mention is answered by the LLM, replying to the message.
	id := dc.Message(t, discordtest.Msg{Channel: ch, Guild: guild, Author: alice,
		Content: discordtest.Mention(dc.Bot) + " hello from discord", Mentions: []discordtest.User{dc.Bot}})
	dc.WaitFor(t, "the reply", func() bool { return len(dc.Sent()) >= 1 })
	reply := dc.Sent()[0]
	if reply.ChannelID != ch || reply.ReplyTo != id || !strings.Contains(reply.Content, "echo: hello from discord") {
		t.Fatalf("reply = %+v; want the LLM's echo in channel %s replying to %s", reply, ch, id)
	}
	if r, _ := llm.Last(); r.LastUser() != "hello from discord" {
		t.Fatalf("LLM saw %q", r.LastUser())
	}

	// The commands are registered in the allowed guild, routing's included,
	// and /model is answered by core after a deferred response.
	// They are registered one by one: wait for the whole list, then name
	// what is missing.
	wantCmds := []string{"model", "models", "new", "status", "help", "retry", "schedule", "schedules", "unschedule"}
	registered := func() (missing []string) {
		cmds := dc.Commands(guild)
		for _, name := range wantCmds {
			if _, ok := cmds[name]; !ok {
				missing = append(missing, name)
			}
		}
		return missing
	}
	cmdsBy := time.Now().Add(10 * time.Second)
	for len(registered()) > 0 && time.Now().Before(cmdsBy) {
		time.Sleep(20 * time.Millisecond)
	}
	if missing := registered(); len(missing) > 0 {
		t.Errorf("commands %v are not registered in guild %s; registered: %d", missing, guild, len(dc.Commands(guild)))
	}
	calls := llm.Count()
	iid := dc.Interaction(t, alice, guild, ch, "model", nil)
	dc.WaitFor(t, "the command's answer", func() bool { return len(dc.Sent()) >= 2 })
	if got := dc.Sent()[1]; got.Interaction != iid || got.Via != "original" || !strings.Contains(got.Content, "fake/small") {
		t.Fatalf("/model answered %+v; want the model in use as the deferred response", got)
	}
	if n := llm.Count(); n != calls {
		t.Fatalf("the command reached the LLM: %d calls, want %d", n, calls)
	}
	// /memory, answered ephemerally, lists alice's facts in the guild.
	if _, err := h.app.db.SaveMemory(context.Background(), core.Memory{Owner: "discord:" + alice.ID, Content: "alice's salary is 100k"}); err != nil {
		t.Fatal(err)
	}
	mid := dc.Interaction(t, alice, guild, ch, "memory", nil)
	dc.WaitFor(t, "the /memory answer", func() bool { return len(dc.Sent()) >= 3 })
	if got := dc.Sent()[2]; got.Interaction != mid || !strings.Contains(got.Content, "alice's salary is 100k") {
		t.Fatalf("/memory answered %+v; want alice's facts, to her alone", got)
	}

	// 👎 on the reply becomes a negative signal for its model.
	dc.React(t, alice, guild, ch, reply.ID, "👎", true)
	ctx := context.Background()
	rep := deliveredReply(t, h, "discord", reply.ID)
	var err error
	var sigs []core.Signal
	deadline := time.Now().Add(20 * time.Second)
	for len(sigs) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if sigs, err = h.app.db.SignalsForReply(ctx, rep.ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(sigs) != 1 || sigs[0].Polarity != core.Negative || sigs[0].Model != "fake/small" {
		t.Fatalf("signals for reply %d = %+v; want one negative on fake/small", rep.ID, sigs)
	}

	// Ready while connected; not ready while the gateway is gone.
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %q; want 200 while connected", code, body)
	}
	dc.RefuseConnections(true)
	dc.Disconnect(discordtest.CloseUnknownError)
	deadline = time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(t, "http://"+addr+"/readyz")
		if code != 200 && strings.Contains(body, "discord") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q while the gateway is unreachable; want it down naming discord", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dc.RefuseConnections(false)
}

func TestE2EDiscordRefusedTokenFailsStartNamingTheKey(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	dc := discordtest.New(t, dcToken)
	dc.CloseOnIdentify(discordtest.CloseAuthenticationFailed)
	cfgPath := writeConfig(t, discordConfig(t.TempDir(), llm.BaseURL(), dc.URL, ""))
	logs := &lockedBuf{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := loadConfigFile(t, cfgPath)
	seedDB(t, cfg.State.DataDir)
	app, err := BuildApp(ctx, cfg, AppOptions{Stdin: strings.NewReader(""), Stdout: io.Discard,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Run(ctx)
	app.Close()
	if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.discord.token") || !strings.Contains(err.Error(), "4004") {
		t.Fatalf("run with a refused token = %v; want an auth error naming channels.discord.token", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the refused token did not stop the run")
	}
	if strings.Contains(err.Error()+logs.String(), "SECRET-discord") {
		t.Fatalf("the token is in the error or the log:\n%v\n%s", err, logs.String())
	}
}
