package slack_test

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/core"
)

// TestCheckCredential: `opentalon doctor --channels` asks auth.test once;
// a refused token names its config key.
func TestCheckCredential(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken, slacktest.Options{})
	b := newBot(t, srv, nil, nil)
	who, err := b.CheckCredential(context.Background())
	if err != nil || !strings.HasPrefix(who, "@") || len(who) < 2 {
		t.Fatalf("CheckCredential = %q, %v", who, err)
	}
	srv.Revoke(botToken, "invalid_auth")
	_, err = b.CheckCredential(context.Background())
	if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.slack.bot_token") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("revoked: %v (kind %v)", err, core.ErrorKind(err))
	}
}
