package main

// Slack through the whole App: the config keys of issue 10, the fake
// Slack (Web API and Socket Mode, driven through slack-go) and the fake
// LLM.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

const (
	slackBotToken = "xoxb-9-e2e-SECRET-bot"
	slackAppToken = "xapp-9-e2e-SECRET-app"
)

// slackConfig is testConfig with the console off, Slack on against the
// fake, and the HTTP server on a free port; extra goes into the slack
// section.
func slackConfig(dataDir, llmURL, apiURL, extra string) string {
	y := testConfig(dataDir, llmURL, fmt.Sprintf(`channels:
  console: { enabled: false }
  slack:
    enabled: true
    bot_token: %q
    app_token: %q
    api_url: %q
%s`, slackBotToken, slackAppToken, apiURL, extra))
	return strings.Replace(y, `listen: ""`, `listen: "127.0.0.1:0"`, 1)
}

func TestE2ESlackSocketModeThroughApp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	h := startApp(t, loadConfigFile(t, writeConfig(t, slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: socket\n    reply_in_thread: auto\n"))))
	addr := waitAddr(t, h.app)
	srv.WaitConnected(t, 1, 20*time.Second)
	ctx := context.Background()

	// A mention in a channel is answered by the LLM in a thread under it.
	env := srv.Deliver(srv.Mention("alice", "C1", "hello from slack", ""))
	reply := srv.WaitPosts(t, 1, 20*time.Second)[0]
	if reply.Channel != "C1" || reply.ThreadTS != env.TS || reply.Text != "echo: hello from slack" {
		t.Fatalf("reply = %+v; want the LLM's echo in C1's thread %s", reply, env.TS)
	}
	if r, _ := llm.Last(); r.LastUser() != "hello from slack" {
		t.Fatalf("LLM saw %q", r.LastUser())
	}

	// /model as a slash command is answered by core, ephemerally.
	calls := llm.Count()
	srv.Deliver(srv.Slash("alice", "C1", "/model", ""))
	srv.WaitFor(t, "the /model answer", 20*time.Second, func() bool { return len(srv.Ephemerals()) == 1 })
	if e := srv.Ephemerals()[0]; !strings.Contains(e.Text, "fake/small") {
		t.Fatalf("/model answered %q; want the model in use", e.Text)
	}
	if n := llm.Count(); n != calls {
		t.Fatalf("the slash command reached the LLM: %d calls, want %d", n, calls)
	}

	// /memory lists alice's facts only where no one else reads them: the
	// slash command's ephemeral answer, not a post in the channel.
	if _, err := h.app.db.SaveMemory(ctx, core.Memory{Owner: "slack:UALICE", Content: "alice's salary is 100k"}); err != nil {
		t.Fatal(err)
	}
	srv.Deliver(srv.Mention("alice", "C1", "/memory", ""))
	if p := srv.WaitPosts(t, 2, 20*time.Second)[1]; strings.Contains(p.Text, "salary") || !strings.Contains(p.Text, "private chat") {
		t.Fatalf("/memory typed in the channel posted %q; want where to ask instead of alice's facts", p.Text)
	}
	srv.Deliver(srv.Slash("alice", "C1", "/memory", ""))
	srv.WaitFor(t, "the /memory answer", 20*time.Second, func() bool { return len(srv.Ephemerals()) == 2 })
	if e := srv.Ephemerals()[1]; !strings.Contains(e.Text, "alice's salary is 100k") {
		t.Fatalf("/memory as a slash command answered %q; want alice's facts, to her alone", e.Text)
	}

	// -1 on the bot's reply is a negative signal for its model. A user
	// reacts once the reply is there: after its delivery was recorded. (A
	// Slack reaction names the channel only; until the record exists it
	// cannot be mapped to the reply in the thread, so a reaction sent the
	// moment the fake saw the post was judged against nothing and the
	// test waited 20 s for a signal that never came.)
	rep := deliveredReply(t, h, "slack", "C1:"+reply.TS)
	srv.Deliver(srv.Reaction("alice", "C1", reply.TS, "-1", true))
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
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %q; want 200 while connected", code, body)
	}
}

func TestE2ESlackEventsModeThroughApp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	extra := "    mode: events\n    signing_secret: sign-SECRET\n    events: { listen: \"127.0.0.1:0\", path: /hooks/slack }\n    reply_in_thread: never\n"
	h := startApp(t, loadConfigFile(t, writeConfig(t, slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, extra))))
	var bot *slack.Bot
	for _, ch := range h.app.gateway.Channels() {
		if b, ok := ch.(*slack.Bot); ok {
			bot = b
		}
	}
	if bot == nil {
		t.Fatal("no slack channel in the gateway")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, err := bot.EventsAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String() + "/hooks/slack"
	env := srv.Mention("alice", "C1", "over http", "")
	if code, _ := slacktest.PostEvent(t, url, env, slacktest.Signed{Secret: "wrong"}); code != 401 {
		t.Fatalf("bad signature: %d, want 401", code)
	}
	if code, body := slacktest.PostEvent(t, url, env, slacktest.Signed{Secret: "sign-SECRET"}); code != 200 {
		t.Fatalf("signed event: %d %q", code, body)
	}
	if p := srv.WaitPosts(t, 1, 20*time.Second)[0]; p.ThreadTS != "" || p.Text != "echo: over http" {
		t.Fatalf("reply = %+v; want a top-level echo (reply_in_thread: never)", p)
	}
}

// TestE2ESlackRefusedTokenStopsStartUp: a bot token Slack refuses at start
// ends the run with the key to fix.
func TestE2ESlackRefusedTokenStopsStartUp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	srv.Revoke(slackBotToken, "invalid_auth")
	h := startApp(t, loadConfigFile(t, writeConfig(t, slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, ""))))
	select {
	case err := <-h.done:
		h.stop() // the run is over: nothing for the harness to wait for
		h.stop = nil
		if err == nil || !strings.Contains(err.Error(), "channels.slack.bot_token") || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("run ended with %v; want an error naming channels.slack.bot_token", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not stop on a refused token")
	}
}

// TestE2ESlackConfigCheckNamesMissingTokens: config check tells which token
// the chosen mode is missing.
func TestE2ESlackConfigCheckNamesMissingTokens(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	for _, tt := range []struct{ mode, want, not string }{
		{"socket", "channels.slack.app_token: missing; mode socket needs an app-level token (xapp-", "channels.slack.signing_secret"},
		{"events", "channels.slack.signing_secret: missing; mode events needs the app's signing secret", "channels.slack.app_token"},
	} {
		y := testConfig(t.TempDir(), llm.BaseURL(), fmt.Sprintf("channels:\n  slack:\n    enabled: true\n    mode: %s\n    bot_token: \"${SLACK_BOT_TOKEN}\"\n", tt.mode))
		path := writeConfig(t, y)
		res := runMain(t, map[string]string{"SLACK_BOT_TOKEN": "xoxb-1"}, "", "--config", path, "config", "check")
		if res.code == 0 || !strings.Contains(res.stderr, tt.want) || strings.Contains(res.stderr, tt.not) {
			t.Errorf("mode %s: config check exit %d:\n%s\nwant it to name %q only", tt.mode, res.code, res.stderr, tt.want)
		}
	}
}

// TestE2ESlackSlashCommandsInAChannelActOnItsThread: Slack gives a slash
// command its channel, never its thread. In a channel whose conversations
// are threads, /model given before any thread pins the channel, and its
// new threads start with it; /retry and /status then act on the thread
// where the bot last answered the user (they used to act on the
// channel's top level, where nothing was ever answered).
func TestE2ESlackSlashCommandsInAChannelActOnItsThread(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	srv := slacktest.New(t, slackBotToken, slackAppToken)
	y := slackConfig(t.TempDir(), llm.BaseURL(), srv.URL, "    mode: socket\n    reply_in_thread: auto\n")
	y = strings.Replace(y, "    fake/small: { alias: small, weight: 80, context_window: 8000 }\n",
		"    fake/small: { alias: small, weight: 80, context_window: 8000 }\n    fake/big: { alias: big, weight: 20, context_window: 8000 }\n", 1)
	startApp(t, loadConfigFile(t, writeConfig(t, y)))
	srv.WaitConnected(t, 1, 20*time.Second)

	srv.Deliver(srv.Slash("alice", "C1", "/model", "big"))
	srv.WaitFor(t, "the /model answer", 20*time.Second, func() bool { return len(srv.Ephemerals()) == 1 })
	if e := srv.Ephemerals()[0]; !strings.Contains(e.Text, "Pinned fake/big") {
		t.Fatalf("/model big answered %q", e.Text)
	}
	env := srv.Deliver(srv.Mention("alice", "C1", "first question", ""))
	reply := srv.WaitPosts(t, 1, 20*time.Second)[0]
	if reply.ThreadTS != env.TS {
		t.Fatalf("reply %+v; want it in the thread %s", reply, env.TS)
	}
	if r, _ := llm.Last(); r.Model != "big" {
		t.Fatalf("the new thread was answered by %q; want big, pinned for the channel", r.Model)
	}

	// Bob's thread, later: alice's /retry is still about her own.
	bob := srv.Deliver(srv.Mention("bob", "C1", "bob's question", ""))
	if p := srv.WaitPosts(t, 2, 20*time.Second)[1]; p.ThreadTS != bob.TS {
		t.Fatalf("bob's reply %+v; want it in his thread %s", p, bob.TS)
	}
	calls := llm.Count()
	srv.Deliver(srv.Slash("alice", "C1", "/retry", ""))
	retried := srv.WaitPosts(t, 3, 20*time.Second)[2]
	if retried.ThreadTS != env.TS || llm.Count() != calls+1 {
		t.Fatalf("/retry posted %+v after %d LLM calls (was %d); want the re-answer in alice's thread %s", retried, llm.Count(), calls, env.TS)
	}
	if r, _ := llm.Last(); r.LastUser() != "first question" {
		t.Fatalf("/retry asked the LLM %q; want alice's question again", r.LastUser())
	}
	srv.Deliver(srv.Slash("alice", "C1", "/status", ""))
	srv.WaitFor(t, "the /status answer", 20*time.Second, func() bool { return len(srv.Ephemerals()) == 2 })
	if e := srv.Ephemerals()[1]; strings.Contains(e.Text, "Session: 0 messages") {
		t.Fatalf("/status answered %q; want the thread's session, not the empty top level", e.Text)
	}
}
