package slack

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

func TestStripMention(t *testing.T) {
	for in, want := range map[string]string{
		"<@UBOT> hello":             "hello",
		"<@UBOT>: hello":            "hello",
		"hey <@UBOT>, what now?":    "hey what now?",
		"<@UBOT|talon> hi":          "hi",
		"ask <@UBOB> not <@UBOT>":   "ask <@UBOB> not",
		"no mention at all":         "no mention at all",
		"<@UBOT>":                   "",
		"<@UBOT> /model  gpt  ":     "/model  gpt",
		"<@UBOT> fix:\n  a\n\tb":    "fix:\n  a\n\tb",
		"see\n<@UBOT>: \n  x":       "see\n\n  x",
		"<@UBOTX> is someone else ": "<@UBOTX> is someone else",
	} {
		if got := stripMention(in, "UBOT"); got != want {
			t.Errorf("stripMention(%q) = %q, want %q", in, got, want)
		}
	}
	if !mentions("hi <@UBOT|talon>", "UBOT") || mentions("hi <@UBOTX>", "UBOT") || mentions("x", "") {
		t.Error("mentions")
	}
}

func TestParseTS(t *testing.T) {
	if got := parseTS("1700000000.000100"); !got.Equal(time.Unix(1700000000, 100_000)) {
		t.Errorf("parseTS = %v", got)
	}
	if !parseTS("").IsZero() || !parseTS("junk").IsZero() {
		t.Error("an unreadable ts must give the zero time")
	}
	if !tsBefore("999999999.9", "1700000000.000001") || tsBefore("1700000000.000002", "1700000000.000001") {
		t.Error("tsBefore must compare times, not strings")
	}
}

func TestClassify(t *testing.T) {
	cfg := config.Default().Channels.Slack
	cfg.BotToken, cfg.AppToken = "xoxb-SECRET", "xapp-SECRET"
	b, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		err  error
		kind core.Kind
		want string
	}{
		{&slack.RateLimitedError{RetryAfter: 3 * time.Second}, core.KindRateLimited, "rate limited"},
		{slack.SlackErrorResponse{Err: "invalid_auth"}, core.KindAuth, "check channels.slack.bot_token"},
		{slack.SlackErrorResponse{Err: "token_revoked"}, core.KindAuth, "token_revoked"},
		{slack.SlackErrorResponse{Err: "missing_scope", Needed: "reactions:write"}, core.KindBadRequest, "add reactions:write"},
		{slack.SlackErrorResponse{Err: "internal_error"}, core.KindUnavailable, "internal_error"},
		{slack.SlackErrorResponse{Err: "not_in_channel"}, core.KindBadRequest, "not_in_channel"},
		{slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}, core.KindUnavailable, "failed"},
		{slack.StatusCodeError{Code: 404, Status: "404 Not Found"}, core.KindInvalid, "channels.slack.api_url"},
		{fmt.Errorf("post https://x/?token=xoxb-SECRET: %w", errors.New("connection refused")), core.KindUnavailable, "<token>"},
	}
	for _, tt := range tests {
		got := b.classify("chat.postMessage", "channels.slack.bot_token", tt.err)
		if core.ErrorKind(got) != tt.kind || !strings.Contains(got.Error(), tt.want) || strings.Contains(got.Error(), "SECRET") {
			t.Errorf("classify(%v) = %v (kind %v); want kind %v mentioning %q", tt.err, got, core.ErrorKind(got), tt.kind, tt.want)
		}
	}
	// An archived channel takes no more messages: its answers are
	// dropped; a channel the bot was not invited to is the operator's to
	// fix and stays an error they hear of.
	if err := b.classify("chat.postMessage", "k", slack.SlackErrorResponse{Err: "is_archived"}); !errors.Is(err, core.ErrRecipientGone) || core.ErrorKind(err) != core.KindBadRequest || !strings.Contains(err.Error(), "is_archived") {
		t.Errorf("is_archived = %v; want a bad_request error carrying core.ErrRecipientGone", err)
	}
	if err := b.classify("chat.postMessage", "k", slack.SlackErrorResponse{Err: "not_in_channel"}); errors.Is(err, core.ErrRecipientGone) {
		t.Errorf("not_in_channel = %v; want no recipient gone", err)
	}
	if core.RetryAfter(b.classify("m", "k", &slack.RateLimitedError{RetryAfter: 3 * time.Second})) != 3*time.Second {
		t.Error("the rate limit's wait is lost")
	}
}
