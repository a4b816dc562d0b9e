package slack_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack"
	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// sinkRecorder is a Sink that records what it is handed.
type sinkRecorder struct {
	mu       sync.Mutex
	accepted []core.Inbound
}

func (s *sinkRecorder) Accept(_ context.Context, in core.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = append(s.accepted, in)
	return nil
}
func (s *sinkRecorder) Edit(context.Context, core.Inbound) (bool, error) { return false, nil }
func (s *sinkRecorder) React(context.Context, core.Reaction) error       { return nil }
func (s *sinkRecorder) Commands() []core.CommandInfo                     { return nil }

// botLogs are the logs of the last newBot, per test.
var botLogs sync.Map // *testing.T → *logBuf

// newBot builds a channel against srv (not running), logging into a
// buffer the test can read with logsOf.
func newBot(t *testing.T, srv *slacktest.Server, cfgEdit func(*config.Slack), optEdit func(*slack.Options)) *slack.Bot {
	t.Helper()
	cfg := config.Default().Channels.Slack
	cfg.Enabled, cfg.BotToken, cfg.AppToken, cfg.APIURL = true, botToken, appToken, srv.URL
	if cfgEdit != nil {
		cfgEdit(&cfg)
	}
	logs := &logBuf{}
	botLogs.Store(t, logs)
	t.Cleanup(func() {
		botLogs.Delete(t)
		if strings.Contains(logs.String(), "SECRET") {
			t.Errorf("a secret reached the log:\n%s", logs.String())
		}
	})
	o := slack.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil)), SendGap: -1}
	if optEdit != nil {
		optEdit(&o)
	}
	b, err := slack.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func logsOf(t *testing.T) string {
	l, _ := botLogs.Load(t)
	return l.(*logBuf).String()
}

// sleeps records the waits a channel asks for, taking none of them.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		s.mu.Lock()
		s.d = append(s.d, d)
		s.mu.Unlock()
	}
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

var toC1 = core.Outbound{Conversation: core.ConversationKey{Channel: "slack", Chat: "C1", Thread: "1700000000.000001"}}

// TestRateLimitedPartIsRetriedAfterTheWait: a 429 with Retry-After is
// waited out and the part sent once more; a second 429 is an error of
// kind rate_limited carrying the wait.
func TestRateLimitedPartIsRetriedAfterTheWait(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	sl := &sleeps{}
	b := newBot(t, srv, nil, func(o *slack.Options) { o.Sleep = sl.sleep })
	srv.Fail("chat.postMessage", slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: 7})
	id, err := b.Send(context.Background(), toC1, "hello")
	if err != nil {
		t.Fatal(err)
	}
	posts := srv.Posts()
	if len(posts) != 1 || id != "C1:"+posts[0].TS || posts[0].ThreadTS != toC1.Conversation.Thread {
		t.Fatalf("id %q, posts %+v", id, posts)
	}
	if calls := srv.Calls("chat.postMessage"); len(calls) != 2 {
		t.Fatalf("%d chat.postMessage calls, want 2", len(calls))
	}
	if got := sl.all(); len(got) != 1 || got[0] != 7*time.Second {
		t.Fatalf("waits = %v; want the 7s Slack asked for", got)
	}
	// Twice in a row: the part is not sent, the error says when to retry.
	srv.Fail("chat.postMessage", slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: 3})
	srv.Fail("chat.postMessage", slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: 3})
	_, err = b.Send(context.Background(), toC1, "again")
	if core.ErrorKind(err) != core.KindRateLimited || core.RetryAfter(err) != 3*time.Second {
		t.Fatalf("err = %v (kind %v, retry after %v); want rate_limited after 3s", err, core.ErrorKind(err), core.RetryAfter(err))
	}
	if len(srv.Posts()) != 1 {
		t.Fatal("a rate limited part counted as sent")
	}
}

// TestOkFalseIsAnError: an ok:false answer is an error with Slack's code,
// logged, never a success; missing_scope names the scope to add; a
// refused token is reported by Healthy with the key to fix.
func TestOkFalseIsAnError(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	b := newBot(t, srv, nil, nil)
	ctx := context.Background()

	srv.Fail("chat.postMessage", slacktest.Failure{Error: "channel_not_found"})
	id, err := b.Send(ctx, toC1, "hello")
	if err == nil || id != "" || core.ErrorKind(err) != core.KindBadRequest || !strings.Contains(err.Error(), "channel_not_found") {
		t.Fatalf("Send = %q, %v; want a bad_request error naming channel_not_found", id, err)
	}
	if l := logsOf(t); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "slack_error=channel_not_found") {
		t.Fatalf("the refusal was not logged as an error:\n%s", l)
	}

	srv.Fail("chat.postMessage", slacktest.Failure{Error: "missing_scope", Needed: "chat:write"})
	_, err = b.Send(ctx, toC1, "hello")
	if err == nil || !strings.Contains(err.Error(), "add chat:write to the app's Bot Token Scopes") {
		t.Fatalf("missing_scope: %v; want the scope to add", err)
	}

	if err := b.Healthy(); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("Healthy before Run = %v", err)
	}
	srv.Revoke(botToken, "account_inactive")
	_, err = b.Send(ctx, toC1, "hello")
	if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.slack.bot_token") {
		t.Fatalf("revoked token: %v; want auth naming channels.slack.bot_token", err)
	}
	if h := b.Healthy(); h == nil || !strings.Contains(h.Error(), "account_inactive") || !strings.Contains(h.Error(), "channels.slack.bot_token") {
		t.Fatalf("Healthy after a refused token = %v", h)
	}
	if len(srv.Posts()) != 0 {
		t.Fatal("a refused part counted as sent")
	}
}

// TestRefusedTokenAtStartIsFatal: a bot or app token Slack refuses when the
// channel starts stops Run with kind auth naming the key.
func TestRefusedTokenAtStartIsFatal(t *testing.T) {
	for _, tt := range []struct{ token, code, key string }{
		{botToken, "invalid_auth", "channels.slack.bot_token"},
		{appToken, "invalid_auth", "channels.slack.app_token"},
		{appToken, "account_inactive", "channels.slack.app_token"},
	} {
		t.Run(tt.key+" "+tt.code, func(t *testing.T) {
			srv := slacktest.New(t, botToken, appToken)
			srv.Revoke(tt.token, tt.code)
			b := newBot(t, srv, nil, nil)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			err := b.Run(ctx, &sinkRecorder{})
			if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), tt.code) {
				t.Fatalf("Run = %v; want kind auth naming %s and %s", err, tt.key, tt.code)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("the error shows a token: %v", err)
			}
		})
	}
}

// TestRevokedWhileRunning: an app token revoked after the channel worked
// does not stop Run (other channels go on); Healthy reports it with the
// key to fix, and the channel keeps trying.
func TestRevokedWhileRunning(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	sl := &sleeps{}
	b := newBot(t, srv, nil, func(o *slack.Options) {
		o.AuthRetry = 50 * time.Millisecond
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			sl.sleep(ctx, d)
			select { // really wait, briefly, so the loop does not spin
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
				return nil
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, &sinkRecorder{}) }()
	srv.WaitConnected(t, 1, wait)
	eventually(t, "healthy", func() bool { return b.Healthy() == nil })
	srv.Revoke(appToken, "token_revoked")
	srv.Disconnect()
	eventually(t, "the refusal reported", func() bool {
		h := b.Healthy()
		return h != nil && strings.Contains(h.Error(), "channels.slack.app_token") && strings.Contains(h.Error(), "token_revoked")
	})
	eventually(t, "tries again", func() bool { return len(srv.Calls("apps.connections.open")) >= 3 })
	// The bot token still works; that does not hide the app token's refusal.
	if _, err := b.Send(ctx, toC1, "the Web API still works"); err != nil {
		t.Fatal(err)
	}
	if h := b.Healthy(); h == nil || !strings.Contains(h.Error(), "channels.slack.app_token") {
		t.Fatalf("Healthy after a working Send = %v; the app token is still refused", h)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while the app token is refused; it must keep trying", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
	if !strings.Contains(logsOf(t), "Slack refused a credential that worked before") {
		t.Errorf("the revocation was not logged:\n%s", logsOf(t))
	}
}

// TestNewRefusesConfigsThatCannotWork: New names the key of a missing
// token or a bad mode.
func TestNewRefusesConfigsThatCannotWork(t *testing.T) {
	for _, tt := range []struct {
		edit func(*config.Slack)
		want string
	}{
		{func(c *config.Slack) { c.BotToken = "" }, "channels.slack.bot_token"},
		{func(c *config.Slack) { c.AppToken = "xoxb-wrong" }, "channels.slack.app_token"},
		{func(c *config.Slack) { c.Mode = config.SlackModeEvents }, "channels.slack.signing_secret"},
		{func(c *config.Slack) { c.Mode = "rtm" }, "channels.slack.mode"},
		{func(c *config.Slack) { c.APIURL = "slack.com/api" }, "channels.slack.api_url"},
	} {
		cfg := config.Default().Channels.Slack
		cfg.BotToken, cfg.AppToken = botToken, appToken
		tt.edit(&cfg)
		_, err := slack.New(slack.Options{Config: cfg})
		if core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New = %v; want invalid naming %s", err, tt.want)
		}
	}
}

// TestEphemeralFallsBackToPostEphemeral: without a response_url (it is
// kept in memory only, so not after a restart) a slash command's answer
// goes out with chat.postEphemeral.
func TestEphemeralFallsBackToPostEphemeral(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	b := newBot(t, srv, nil, nil)
	to := core.Outbound{Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}, ReplyTo: "cmd:trig-1",
		Meta: map[string]string{"kind": "slash", "user": "UALICE"}}
	id, err := b.Send(context.Background(), to, "Model: x")
	if err != nil || !strings.HasPrefix(id, "ephemeral:C1:") {
		t.Fatalf("Send = %q, %v", id, err)
	}
	if e := srv.Ephemerals(); len(e) != 1 || e[0].Channel != "C1" || e[0].User != "UALICE" || e[0].Text != "Model: x" {
		t.Fatalf("ephemerals = %+v", e)
	}
	if len(srv.Posts()) != 0 {
		t.Fatal("a slash command's answer was posted for everyone")
	}
}

// TestCannotConnectIsReported: while Socket Mode cannot connect (slack-go
// retries with backoff), Healthy reports it once the grace period is over.
func TestCannotConnectIsReported(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	for range 50 {
		srv.Fail("apps.connections.open", slacktest.Failure{Status: http.StatusServiceUnavailable})
	}
	b := newBot(t, srv, nil, func(o *slack.Options) { o.UnhealthyAfter = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, &sinkRecorder{}) }()
	eventually(t, "the failing connection reported", func() bool {
		h := b.Healthy()
		return h != nil && strings.Contains(h.Error(), "503")
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
}

// TestResponseURLNeverLogged: a slash command's response_url lets anyone
// post to its channel for half an hour, so it is a credential: when
// posting on it fails at the transport (the error names the URL), the log
// says why without it, and the answer still reaches the user.
func TestResponseURLNeverLogged(t *testing.T) {
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer drop.Close()
	r := newRig(t, setup{})
	env := r.srv.Slash("alice", "C1", "/model", "")
	env.Command["response_url"] = drop.URL + "/commands/T0TEST/1/RESPONSESECRETx9"
	env.Payload, _ = json.Marshal(env.Command)
	r.srv.Deliver(env)
	r.srv.WaitFor(t, "the ephemeral answer", wait, func() bool { return len(r.srv.Ephemerals()) == 1 })
	if !strings.Contains(r.logs.String(), "response_url failed") {
		t.Fatalf("the failed response_url was not logged:\n%s", r.logs.String())
	}
	// The rig's cleanup fails the test when "SECRET" reached the log.
}

// TestRefusalsNameTheFix: the ok:false codes an operator meets while
// setting the app up say what to change in Slack, not only the code.
func TestRefusalsNameTheFix(t *testing.T) {
	for _, tt := range []struct {
		code, needed string
		want         []string
	}{
		{"not_in_channel", "", []string{"not_in_channel", "/invite @talon"}},
		{"channel_not_found", "", []string{"channel_not_found", "/invite @talon", "channel id"}},
		{"missing_scope", "chat:write", []string{"add chat:write to the app's Bot Token Scopes"}},
	} {
		t.Run(tt.code, func(t *testing.T) {
			srv := slacktest.New(t, botToken, appToken)
			b := newBot(t, srv, nil, nil)
			ctx := context.Background()
			if _, err := b.CheckCredential(ctx); err != nil {
				t.Fatal(err)
			}
			srv.Fail("chat.postMessage", slacktest.Failure{Error: tt.code, Needed: tt.needed})
			_, err := b.Send(ctx, toC1, "hello")
			if err == nil || core.ErrorKind(err) != core.KindBadRequest {
				t.Fatalf("Send = %v (kind %v); want a bad_request error", err, core.ErrorKind(err))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Send = %v; want it to say %q", err, w)
				}
			}
		})
	}
}

// TestSocketRefusalNamesTheFix: Slack answering apps.connections.open
// with ok:false is retried by slack-go like a network error; the log and
// Healthy say what to change: an app-level token without
// connections:write is made anew under App-Level Tokens (not the Bot
// Token Scopes), and a token of the wrong kind names its config key.
func TestSocketRefusalNamesTheFix(t *testing.T) {
	for _, tt := range []struct {
		code string
		want string
	}{
		{"missing_scope", "generate one with that scope (Basic Information → App-Level Tokens) and set it in channels.slack.app_token"},
		{"not_allowed_token_type", "not_allowed_token_type: Slack refused the token; check channels.slack.app_token"},
	} {
		t.Run(tt.code, func(t *testing.T) {
			srv := slacktest.New(t, botToken, appToken)
			for range 50 {
				srv.Fail("apps.connections.open", slacktest.Failure{Error: tt.code, Needed: "connections:write"})
			}
			b := newBot(t, srv, nil, func(o *slack.Options) { o.UnhealthyAfter = 10 * time.Millisecond })
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx, &sinkRecorder{}) }()
			eventually(t, "the refusal reported by Healthy", func() bool {
				h := b.Healthy()
				return h != nil && strings.Contains(h.Error(), tt.want)
			})
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
			case <-time.After(wait):
				t.Fatal("Run did not return")
			}
			if l := logsOf(t); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, tt.want) {
				t.Fatalf("the refusal was not logged as an error naming the fix:\n%s", l)
			}
			if h := b.Healthy(); h != nil && strings.Contains(h.Error(), "Bot Token Scopes") {
				t.Fatalf("Healthy sends the operator to the bot's scopes: %v", h)
			}
		})
	}
}

// TestSocketTransientFailureIsNoRefusal: an ok:false Slack means to be
// passing (internal_error) is logged as a failed attempt, not as a
// refusal the operator must fix.
func TestSocketTransientFailureIsNoRefusal(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	for range 50 {
		srv.Fail("apps.connections.open", slacktest.Failure{Error: "internal_error"})
	}
	b := newBot(t, srv, nil, func(o *slack.Options) { o.UnhealthyAfter = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, &sinkRecorder{}) }()
	eventually(t, "the failure logged", func() bool {
		return strings.Contains(logsOf(t), "internal_error")
	})
	cancel()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
	l := logsOf(t)
	if !strings.Contains(l, `level=WARN msg="Socket Mode connection failed`) || strings.Contains(l, "refused the Socket Mode connection") {
		t.Fatalf("a transient failure was not logged as a failed attempt:\n%s", l)
	}
}

// TestRefusedAckReactionIsToldOnce: an ack reaction every message will be
// refused (the reactions:write scope missing, an emoji name the workspace
// lacks) is a warning naming the fix, once, not a debug line per message;
// the messages are answered all the same.
func TestRefusedAckReactionIsToldOnce(t *testing.T) {
	for _, tt := range []struct {
		code, needed string
		want         []string
	}{
		{"missing_scope", "reactions:write", []string{"add reactions:write to the app's Bot Token Scopes", `channels.slack.ack_reaction: \"\"`}},
		{"invalid_name", "", []string{"invalid_name", "channels.slack.ack_reaction to an emoji name"}},
	} {
		t.Run(tt.code, func(t *testing.T) {
			r := newRig(t, setup{})
			r.srv.Fail("reactions.add", slacktest.Failure{Error: tt.code, Needed: tt.needed})
			r.srv.Fail("reactions.add", slacktest.Failure{Error: tt.code, Needed: tt.needed})
			for i, text := range []string{"one", "two"} {
				r.srv.Deliver(r.srv.DM("alice", text, ""))
				r.srv.WaitPosts(t, i+1, wait)
				r.srv.WaitFor(t, "the ack reaction tried", wait, func() bool { return len(r.srv.Calls("reactions.add")) == i+1 })
			}
			eventually(t, "the second refusal logged", func() bool { return strings.Count(r.logs.String(), "reactions.add") >= 2 })
			logs := r.logs.String()
			if n := strings.Count(logs, "level=WARN msg=\"Slack refused the ack reaction"); n != 1 {
				t.Fatalf("%d warnings about the ack reaction, want 1:\n%s", n, logs)
			}
			for _, w := range tt.want {
				if !strings.Contains(logs, w) {
					t.Errorf("the warning does not say %q:\n%s", w, logs)
				}
			}
		})
	}
}
