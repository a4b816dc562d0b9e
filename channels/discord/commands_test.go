package discord_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
)

// gatewayCommands are the commands a gateway with routing advertises.
var gatewayCommands = []core.CommandInfo{
	{Name: "help", Usage: "/help", Description: "List the commands"},
	{Name: "model", Usage: "/model [name|alias|auto|@profile]", Description: "Show, pin or unpin the model of this conversation"},
	{Name: "models", Usage: "/models", Description: "List the models with aliases, weights, prices and health"},
	{Name: "new", Usage: "/new", Description: "Start a fresh conversation"},
	{Name: "retry", Usage: "/retry", Description: "Answer the last question again with the next model"},
	{Name: "status", Usage: "/status", Description: "Model, messages and tokens of this conversation"},
	{Name: "Not A Name!", Usage: "/x", Description: "not a Discord command name"},
}

// runOnce runs a channel against srv until its commands are registered
// (the fake counts writes) and stops it.
func runOnce(t *testing.T, srv *discordtest.Server, edit func(*config.Discord), sink *fakeSink, settled func() bool) {
	t.Helper()
	logs := &syncBuffer{}
	o := options(t, srv, logs)
	if edit != nil {
		edit(&o.Config)
	}
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bot.Run(ctx, sink) }()
	srv.WaitFor(t, "the commands registered", func() bool { return strings.Contains(logs.String(), "commands registered") && settled() })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	bot.Close()
}

func names(cmds map[string]json.RawMessage) []string {
	var out []string
	for n := range cmds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestApplicationCommandsRegisteredIdempotently(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	sink := &fakeSink{commands: gatewayCommands}
	runOnce(t, srv, nil, sink, func() bool { return true })
	got := srv.Commands("")
	if strings.Join(names(got), " ") != "help model models new retry status" {
		t.Fatalf("global commands = %v", names(got))
	}
	var model struct {
		Description string `json:"description"`
		Options     []struct {
			Type     int    `json:"type"`
			Name     string `json:"name"`
			Required bool   `json:"required"`
		} `json:"options"`
	}
	if err := json.Unmarshal(got["model"], &model); err != nil {
		t.Fatal(err)
	}
	if len(model.Options) != 1 || model.Options[0].Name != "model" || model.Options[0].Type != 3 || model.Options[0].Required {
		t.Errorf("/model = %s, want one optional text option named model", got["model"])
	}
	writes := srv.CommandWrites()
	if writes != 6 {
		t.Errorf("%d command writes on the first start, want 6 creates", writes)
	}

	// A second start with the same commands writes nothing.
	runOnce(t, srv, nil, sink, func() bool { return true })
	if n := srv.CommandWrites(); n != writes {
		t.Errorf("a second start wrote %d commands, want none", n-writes)
	}

	// A changed description is edited, a command core dropped deleted.
	changed := append([]core.CommandInfo(nil), gatewayCommands[:5]...)
	changed[0].Description = "What I can do"
	runOnce(t, srv, nil, &fakeSink{commands: changed}, func() bool { return srv.CommandWrites() >= writes+2 })
	if n := srv.CommandWrites(); n != writes+2 {
		t.Errorf("%d writes for one edit and one deletion", n-writes)
	}
	if got := srv.Commands(""); strings.Join(names(got), " ") != "help model models new retry" || !strings.Contains(string(got["help"]), "What I can do") {
		t.Errorf("after the change: %v %s", names(got), got["help"])
	}
}

// A READY that names no application still has the commands registered,
// under the bot user's id (the application's).
func TestApplicationCommandsRegisteredWhenReadyNamesNoApplication(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	srv.ReadyWithoutApplication.Store(true)
	runOnce(t, srv, nil, &fakeSink{commands: gatewayCommands}, func() bool { return srv.CommandWrites() >= 6 })
	if got := srv.Commands(""); strings.Join(names(got), " ") != "help model models new retry status" {
		t.Fatalf("global commands = %v, want the six registered", names(got))
	}
}

func TestApplicationCommandsPerGuildAndSwitchedOff(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	g1, g2 := srv.Guild(), srv.Guild()
	sink := &fakeSink{commands: gatewayCommands}
	runOnce(t, srv, func(c *config.Discord) { c.AllowGuilds = []string{g1, g2} }, sink,
		func() bool { return len(srv.Commands(g1)) == 6 && len(srv.Commands(g2)) == 6 })
	if len(srv.Commands("")) != 0 {
		t.Errorf("global commands registered although allow_guilds is set: %v", names(srv.Commands("")))
	}

	off := discordtest.New(t, token)
	logs := &syncBuffer{}
	o := options(t, off, logs)
	o.Config.RegisterCommands = false
	bot, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	runBot(t, bot, sink)
	off.WaitFor(t, "connected", off.Connected)
	time.Sleep(100 * time.Millisecond)
	for _, c := range off.Calls() {
		if strings.Contains(c.Path, "/commands") {
			t.Errorf("register_commands: false, yet %s %s", c.Method, c.Path)
		}
	}
}

// TestCommandAnswerAfterTheTokenExpired: once Discord's window for an
// interaction closed, the rest of a private command's answer (/status:
// only its user sees it) goes to the user's direct messages, never to the
// guild's channel; a user who takes no direct messages is told in the
// channel without a word of the answer. The answer of /retry is the
// conversation's and goes to the channel.
func TestCommandAnswerAfterTheTokenExpired(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, command string
		closedDMs     bool
		want          string // where part two goes: "dm", "notice", "channel"
	}{
		{"a private answer goes to the DMs", "status", false, "dm"},
		{"closed DMs get a notice that shows nothing", "status", true, "notice"},
		{"a public answer goes to the channel", "retry", false, "channel"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := discordtest.New(t, token)
			bot, sink := sinkBot(t, srv)
			guild := srv.Guild()
			ch := srv.TextChannel(guild)
			alice := srv.User("alice")
			if tt.closedDMs {
				srv.CloseDMs(alice)
			}
			id := srv.Interaction(t, alice, guild, ch, tt.command, nil)
			srv.WaitFor(t, "the deferred response", func() bool { return len(srv.Callbacks()) == 1 && len(sink.inbound()) == 1 })
			in := sink.inbound()[0]
			if in.Text != "/"+tt.command || in.MessageID != id || in.Meta["interaction"] != id || !in.Mentioned {
				t.Fatalf("inbound = %+v", in)
			}
			to := core.Outbound{Conversation: in.Conversation, ReplyTo: in.MessageID, Meta: in.Meta, Part: 0, Parts: 3}
			if _, err := bot.Send(context.Background(), to, "part one"); err != nil {
				t.Fatal(err)
			}
			srv.ExpireInteraction(id)
			for n, part := range []string{"part two: a secret", "part three: another"} {
				to.Part = n + 1
				if _, err := bot.Send(context.Background(), to, part); err != nil {
					t.Fatal(err)
				}
			}
			sent := srv.Sent()
			if len(sent) == 0 || sent[0].Via != "original" {
				t.Fatalf("sent = %+v, want the deferred response edited first", sent)
			}
			rest := sent[1:]
			switch tt.want {
			case "dm":
				dm := srv.DM(alice)
				if len(rest) != 2 || rest[0].ChannelID != dm || rest[1].ChannelID != dm ||
					rest[0].Content != "The answer to your command in <#"+ch+">:\npart two: a secret" || rest[1].Content != "part three: another" {
					t.Errorf("after the window: %+v, want both parts in alice's DMs (%s), the first saying where the command was given", rest, dm)
				}
			case "notice":
				if len(rest) != 1 || rest[0].ChannelID != ch || !strings.Contains(rest[0].Content, "<@"+alice.ID+">") ||
					strings.Contains(rest[0].Content, "secret") || strings.Contains(rest[0].Content, "another") {
					t.Fatalf("after the window: %+v, want one notice in the channel that pings alice and shows nothing of the answer", rest)
				}
				if am := rest[0].AllowedMentions; am == nil || len(am.Users) != 1 || am.Users[0] != alice.ID {
					t.Errorf("the notice's allowed_mentions = %+v, want alice only", rest[0].AllowedMentions)
				}
			case "channel":
				if len(rest) != 2 || rest[0].ChannelID != ch || rest[0].ReplyTo != "" || rest[0].Content != "part two: a secret" {
					t.Errorf("after the window: %+v, want the parts in the channel", rest)
				}
			}
			for _, m := range rest {
				if tt.want != "channel" && m.ChannelID == ch && strings.Contains(m.Content, "secret") {
					t.Errorf("a private answer was posted in the guild's channel: %+v", m)
				}
			}
		})
	}
}

// TestPrivateAnswerAfterARestartGoesToTheDMs: a private command's answer
// whose interaction this process does not know (received before a
// restart, no keeper) goes to the user's direct messages, led by where
// the command was given.
func TestPrivateAnswerAfterARestartGoesToTheDMs(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	bot, _ := sinkBot(t, srv)
	guild := srv.Guild()
	ch := srv.TextChannel(guild)
	alice := srv.User("alice")
	to := core.Outbound{
		Conversation: core.ConversationKey{Channel: "discord", Chat: ch},
		Meta:         map[string]string{"interaction": "1234", "ephemeral": "1", "user": alice.ID},
		Parts:        1,
	}
	if _, err := bot.Send(context.Background(), to, "your memories: none"); err != nil {
		t.Fatal(err)
	}
	sent := srv.Sent()
	if len(sent) != 1 || sent[0].ChannelID != srv.DM(alice) || !strings.HasPrefix(sent[0].Content, "The answer to your command in <#"+ch+">:") ||
		!strings.HasSuffix(sent[0].Content, "your memories: none") {
		t.Errorf("sent = %+v, want the answer in alice's DMs, led by the channel it was asked in", sent)
	}
}

// TestCommandDeferredInTimeWhileChannelLookupsAreRateLimited: Discord
// gives an interaction 3 seconds for its first response. The interaction
// names its channel (and a thread's parent) itself, so no channel lookup,
// which a rate limit can hold up for longer, stands before the deferred
// response.
func TestCommandDeferredInTimeWhileChannelLookupsAreRateLimited(t *testing.T) {
	t.Parallel()
	r := start(t, nil, nil)
	thread := r.srv.Thread(r.guild, r.channel)
	r.srv.RateLimit("GET", "/channels/", 3500*time.Millisecond, 1)
	id := r.srv.Interaction(t, r.alice, r.guild, thread, "model", nil)
	s := r.waitSent(t, 1)[0]
	cbs := r.srv.Callbacks()
	if len(cbs) != 1 || cbs[0].Interaction != id || cbs[0].Type != 5 {
		t.Fatalf("callbacks = %+v, want the deferred response (type 5) to %s accepted within Discord's window", cbs, id)
	}
	if s.Via != "original" || s.Interaction != id {
		t.Fatalf("answer = %+v, want the deferred response edited into core's answer", s)
	}
}

// TestCommandAnswersAreEphemeralAsOnSlack: a slash command's answer is a
// notice for its user (/memory shows what the bot remembers about them),
// so, as Slack answers a slash command with response_type ephemeral, the
// deferred response carries flag 64 and so does every follow-up part.
// /retry's re-answer is a reply of the conversation and stays public, as
// on Slack.
func TestCommandAnswersAreEphemeralAsOnSlack(t *testing.T) {
	t.Parallel()
	const ephemeral = 64
	srv := discordtest.New(t, token)
	bot, sink := sinkBot(t, srv)
	guild := srv.Guild()
	ch := srv.TextChannel(guild)
	for n, tt := range []struct {
		command string
		flags   int
	}{
		{"memory", ephemeral},
		{"status", ephemeral},
		{"schedules", ephemeral},
		{"pair", ephemeral},
		{"retry", 0},
	} {
		id := srv.Interaction(t, srv.User("alice"), guild, ch, tt.command, nil)
		srv.WaitFor(t, "the deferred response", func() bool { return len(srv.Callbacks()) == n+1 && len(sink.inbound()) == n+1 })
		if cb := srv.Callbacks()[n]; cb.Interaction != id || cb.Type != 5 || cb.Flags != tt.flags {
			t.Errorf("/%s: deferred response = %+v, want type 5 with flags %d", tt.command, cb, tt.flags)
		}
		in := sink.inbound()[n]
		to := core.Outbound{Conversation: in.Conversation, ReplyTo: in.MessageID, Meta: in.Meta, Parts: 2}
		for part, text := range []string{"part one", "part two"} {
			to.Part = part
			if _, err := bot.Send(context.Background(), to, text); err != nil {
				t.Fatalf("/%s part %d: %v", tt.command, part, err)
			}
		}
		sent := srv.Sent()[2*n:]
		if len(sent) != 2 || sent[0].Via != "original" || sent[1].Via != "followup" {
			t.Fatalf("/%s: sent = %+v, want the deferred response edited, then a follow-up", tt.command, sent)
		}
		for _, s := range sent {
			if s.Flags != tt.flags {
				t.Errorf("/%s: %s part %q has flags %d, want %d", tt.command, s.Via, s.Content, s.Flags, tt.flags)
			}
		}
	}
}

// A command of a user the bot does not answer (access: allowlist without
// them, or a pairing request still waiting after its code was told) is
// answered, only to them: a deferred response left unanswered shows
// "thinking…" until Discord gives up on it.
func TestCommandOfAUserWhoMayNotTalkIsTold(t *testing.T) {
	t.Parallel()
	for _, mode := range []core.AccessMode{core.AccessAllowlist, core.AccessPairing} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := startWith(t, nil, nil, func(o *gateway.Options) {
				o.Access = map[string]core.AccessPolicy{"discord": {Mode: mode, Admins: []string{"999"}}}
				o.Pairings = o.Store.(core.PairingStore)
			})
			n, want := 1, "does not answer you"
			if mode == core.AccessPairing {
				// The first command is told the pairing code; the next
				// one, within the minute, must not be left hanging: it
				// is told the code again.
				want = "pairing code"
				r.srv.Interaction(t, r.alice, r.guild, r.channel, "status", nil)
				if s := r.waitSent(t, 1)[0]; !strings.Contains(s.Content, "pairing code") {
					t.Fatalf("first command answered %+v, want the pairing code", s)
				}
				n = 2
			}
			id := r.srv.Interaction(t, r.alice, r.guild, r.channel, "status", nil)
			s := r.waitSent(t, n)[n-1]
			if s.Interaction != id || s.Via != "original" || s.Flags != 64 || !strings.Contains(s.Content, want) {
				t.Errorf("answer = %+v, want the deferred response edited, ephemeral, with %q", s, want)
			}
			// /retry's deferred response is the channel's (its answer
			// is): it is not left "thinking…" either.
			id = r.srv.Interaction(t, r.alice, r.guild, r.channel, "retry", nil)
			s = r.waitSent(t, n+1)[n]
			if s.Interaction != id || s.Via != "original" || !strings.Contains(s.Content, want) {
				t.Errorf("/retry answered %+v, want the deferred response edited with %q", s, want)
			}
			if turns := r.agent.seen(); len(turns) != 0 {
				t.Errorf("the agent saw %+v", turns)
			}
		})
	}
}
