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

// TestCheckCredentialTriesTheAppToken: in mode socket the doctor also
// asks apps.connections.open, so an app token Slack refuses, or one
// without connections:write, is found before the run.
func TestCheckCredentialTriesTheAppToken(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*slacktest.Server)
		want string
	}{
		{"revoked", func(s *slacktest.Server) { s.Revoke(appToken, "invalid_auth") }, "invalid_auth: Slack refused the token; check channels.slack.app_token"},
		{"no connections:write", func(s *slacktest.Server) {
			s.Fail("apps.connections.open", slacktest.Failure{Error: "missing_scope", Needed: "connections:write"})
		}, "lacks connections:write; generate one with that scope (Basic Information → App-Level Tokens) and set it in channels.slack.app_token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.New(t, botToken, appToken, slacktest.Options{})
			tt.set(srv)
			b := newBot(t, srv, nil, nil)
			_, err := b.CheckCredential(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("CheckCredential = %v; want it to say %q", err, tt.want)
			}
			if srv.Connects() != 0 {
				t.Fatal("the check opened a Socket Mode connection")
			}
		})
	}
}
