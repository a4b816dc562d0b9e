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
// once; a refused token names its config key.
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
