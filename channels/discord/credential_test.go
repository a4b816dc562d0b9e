package discord_test

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/discord/discordtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// TestCheckCredential: `opentalon doctor --channels` asks GET /users/@me
// (and the application, for its flags); a refused token names its config
// key.
func TestCheckCredential(t *testing.T) {
	t.Parallel()
	srv := discordtest.New(t, token)
	logs := &syncBuffer{}
	b, err := discord.New(options(t, srv, logs))
	if err != nil {
		t.Fatal(err)
	}
	who, err := b.CheckCredential(context.Background())
	if err != nil || who != srv.Bot.Username {
		t.Fatalf("CheckCredential = %q, %v; want %q", who, err, srv.Bot.Username)
	}
	o := options(t, srv, logs)
	o.Config.Token = config.Secret("999:SECRET-discord-wrong")
	bad, err := discord.New(o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.CheckCredential(context.Background())
	if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.discord.token") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("wrong token: %v (kind %v)", err, core.ErrorKind(err))
	}
}

// TestCheckCredentialTellsMessageContentOff: the doctor reads the
// application's flags, so a Message Content intent left off in the
// developer portal is told before the run, with what it costs.
func TestCheckCredentialTellsMessageContentOff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		trigger string
		want    []string
	}{
		{config.TriggerMention, []string{"Message Content Intent is off", "Privileged Gateway Intents", "only DMs and messages that mention it"}},
		{config.TriggerAll, []string{"Message Content Intent is off", "trigger: all cannot work"}},
	} {
		srv := discordtest.New(t, token)
		srv.SetMessageContentAllowed(false)
		o := options(t, srv, &syncBuffer{})
		o.Config.Trigger = tt.trigger
		b, err := discord.New(o)
		if err != nil {
			t.Fatal(err)
		}
		who, err := b.CheckCredential(context.Background())
		if err != nil || !strings.HasPrefix(who, srv.Bot.Username) {
			t.Fatalf("CheckCredential = %q, %v", who, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(who, w) {
				t.Errorf("trigger %s: CheckCredential = %q; want it to say %q", tt.trigger, who, w)
			}
		}
	}
}
