package discord_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/core"
)

// TestRefusedSendNamesThePermission: a channel where the bot's role may
// not see or post gives Discord's 403 with code 50001 or 50013; the error
// says which permissions to give, not only "refused".
func TestRefusedSendNamesThePermission(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code int
		want []string
	}{
		{50001, []string{"Missing Access (50001)", "View Channel"}},
		{50013, []string{"Missing Permissions (50013)", "Send Messages", "README"}},
	} {
		r := start(t, nil, nil)
		r.srv.WaitFor(t, "connected", r.srv.Connected)
		r.srv.Refuse("POST", "/channels/"+r.channel+"/messages", tt.code, 1)
		to := core.Outbound{Conversation: core.ConversationKey{Channel: "discord", Chat: r.channel}}
		_, err := r.bot.Send(context.Background(), to, "hello")
		if err == nil || core.ErrorKind(err) != core.KindBadRequest {
			t.Fatalf("%d: Send = %v (kind %v); want a bad_request error", tt.code, err, core.ErrorKind(err))
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d: Send = %v; want it to say %q", tt.code, err, w)
			}
		}
	}
}

// TestSendToAGoneChatIsRecipientGone: a user who closed their DMs to the
// bot (50007) or a deleted channel (10003) takes no more messages; the
// gateway drops the answer rather than sending an apology into the same
// refusal. Missing Access stays the operator's to fix.
func TestSendToAGoneChatIsRecipientGone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code int
		dm   bool
		gone bool
	}{{50007, true, true}, {10003, false, true}, {50001, false, false},
		// 50007 is about a user's DMs: in a guild's channel it says
		// nothing of the chat being gone, and the operator hears of it.
		{50007, false, false}} {
		r := start(t, nil, nil)
		r.srv.WaitFor(t, "connected", r.srv.Connected)
		ch := r.channel
		if tt.dm {
			ch = r.srv.DM(r.alice)
		}
		r.srv.Refuse("POST", "/channels/"+ch+"/messages", tt.code, 1)
		to := core.Outbound{Conversation: core.ConversationKey{Channel: "discord", Chat: ch}}
		_, err := r.bot.Send(context.Background(), to, "hello")
		if core.ErrorKind(err) != core.KindBadRequest || errors.Is(err, core.ErrRecipientGone) != tt.gone {
			t.Fatalf("%d (dm %v): Send = %v (kind %v); want a bad_request error, recipient gone: %v", tt.code, tt.dm, err, core.ErrorKind(err), tt.gone)
		}
	}
}

// TestCommandsRefusedNamesTheScope: a bot invited without the
// applications.commands scope, or not in the guild at all, cannot
// register guild commands (403 Missing Access); the log says to check
// allow_guilds, to invite it with that scope, or to turn the
// registration off.
func TestCommandsRefusedNamesTheScope(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	g := srv.Guild()
	srv.Refuse("GET", "/guilds/"+g+"/commands", 50001, 1)
	logs := &syncBuffer{}
	o := options(t, srv, logs)
	o.Config.AllowGuilds = []string{g}
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	runBot(t, bot, &fakeSink{commands: gatewayCommands})
	srv.WaitFor(t, "the refusal logged", func() bool { return strings.Contains(logs.String(), "refused the application commands") })
	for _, w := range []string{"applications.commands", "channels.discord.allow_guilds", "channels.discord.register_commands: false"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("the log does not say %q:\n%s", w, logs.String())
		}
	}
}

// TestRefusedAckReactionIsToldOnce: an ack reaction Discord will keep
// refusing (no Add Reactions permission, an emoji it does not know) is a
// warning naming the fix, once, not a debug line per message; the
// messages are answered all the same.
func TestRefusedAckReactionIsToldOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code int
		want string
	}{
		{50013, "give the bot's role Add Reactions"},
		{10014, "set channels.discord.ack_reaction to a Unicode emoji"},
	} {
		r := start(t, nil, nil)
		r.srv.WaitFor(t, "connected", r.srv.Connected)
		r.srv.Refuse("PUT", "/reactions/", tt.code, 2)
		puts := func() int {
			n := 0
			for _, c := range r.srv.Calls() {
				if c.Method == "PUT" && strings.Contains(c.Path, "/reactions/") {
					n++
				}
			}
			return n
		}
		for i, text := range []string{"one", "two"} {
			r.mention(t, text)
			r.waitSent(t, i+1)
			r.srv.WaitFor(t, "the ack reaction tried", func() bool { return puts() == i+1 })
		}
		r.srv.WaitFor(t, "the second refusal logged", func() bool { return strings.Count(r.logs.String(), "ack reaction") >= 2 })
		logs := r.logs.String()
		if n := strings.Count(logs, `level=WARN msg="Discord refused the ack reaction`); n != 1 {
			t.Fatalf("%d: %d warnings about the ack reaction, want 1:\n%s", tt.code, n, logs)
		}
		if !strings.Contains(logs, tt.want) {
			t.Errorf("%d: the warning does not say %q:\n%s", tt.code, tt.want, logs)
		}
	}
}
