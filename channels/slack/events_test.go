package slack_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/slack/slacktest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

const signingSecret = "SECRET-signing-secret"

func eventsMode(c *config.Slack) {
	c.Mode, c.SigningSecret, c.AppToken = config.SlackModeEvents, signingSecret, ""
	c.Events.Listen = "127.0.0.1:0"
}

// eventsRig runs the gateway with the channel in events mode and returns
// the endpoint's URL.
func eventsRig(t *testing.T, cfg ...func(*config.Slack)) (*rig, string) {
	t.Helper()
	srv := slacktest.New(t, botToken, appToken)
	r := newRigOn(t, srv, setup{config: func(c *config.Slack) {
		eventsMode(c)
		for _, f := range cfg {
			f(c)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	addr, err := r.bot.EventsAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, "http://" + addr.String() + "/slack/events"
}

// TestEventsModeSignatures: a request with a good signature is answered
// 200 and processed; a bad, stale or missing one is refused with 401 and
// nothing is committed.
func TestEventsModeSignatures(t *testing.T) {
	r, url := eventsRig(t)
	good := slacktest.Signed{Secret: signingSecret}

	code, body := slacktest.PostEvent(t, url, slacktest.URLVerification("chal-123"), good)
	if code != 200 || !strings.Contains(body, `"challenge":"chal-123"`) {
		t.Fatalf("url_verification = %d %q; want 200 with the challenge", code, body)
	}

	bad := []struct {
		name string
		sig  slacktest.Signed
	}{
		{"wrong secret", slacktest.Signed{Secret: "not-the-secret"}},
		{"stale timestamp", slacktest.Signed{Secret: signingSecret, At: time.Now().Add(-10 * time.Minute)}},
		{"from the future", slacktest.Signed{Secret: signingSecret, At: time.Now().Add(10 * time.Minute)}},
	}
	for _, b := range bad {
		env := r.srv.Mention("alice", "C1", "forged: "+b.name, "")
		if code, body := slacktest.PostEvent(t, url, env, b.sig); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %q; want 401", b.name, code, body)
		}
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"type":"event_callback"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned request: %d; want 401", resp.StatusCode)
	}
	if n := r.rows(t); n != 0 {
		t.Fatalf("%d rows committed from refused requests", n)
	}

	env := r.srv.Mention("alice", "C1", "a real question", "")
	if code, body := slacktest.PostEvent(t, url, env, good); code != 200 {
		t.Fatalf("signed event: %d %q; want 200", code, body)
	}
	post := r.srv.WaitPosts(t, 1, wait)[0]
	if post.ThreadTS != env.TS || post.Text != "echo: a real question" {
		t.Fatalf("reply = %+v", post)
	}
	// Slack's retry of the same event (X-Slack-Retry-Num) is answered 200
	// at once and makes no second reply.
	retry := good
	retry.RetryNum = 1
	if code, _ := slacktest.PostEvent(t, url, env, retry); code != 200 {
		t.Fatalf("retry: %d; want 200", code)
	}
	eventually(t, "the answer done", func() bool { return r.doneRows(t) == 1 })
	calm()
	if len(r.srv.Posts()) != 1 || r.rows(t) != 1 {
		t.Fatalf("posts %s rows %d; want one reply", describePosts(r.srv.Posts()), r.rows(t))
	}
	if !strings.Contains(r.logs.String(), "redelivered event already committed") {
		t.Error("the retry was not dropped as a redelivery")
	}
	if strings.Contains(r.logs.String(), signingSecret) {
		t.Error("the signing secret reached the log")
	}
}

// TestEventsModeSlashAndOddRequests: a slash command posted as a form is
// answered ephemerally by core; an unknown event is acknowledged with 200;
// a DM is answered in the DM.
func TestEventsModeSlashAndOddRequests(t *testing.T) {
	r, url := eventsRig(t)
	sig := slacktest.Signed{Secret: signingSecret}
	if code, body := slacktest.PostSlash(t, url, r.srv.Slash("alice", slacktest.DMChannel("alice"), "/status", ""), sig); code != 200 {
		t.Fatalf("slash command: %d %q", code, body)
	}
	r.srv.WaitFor(t, "the ephemeral answer", wait, func() bool { return len(r.srv.Ephemerals()) == 1 })
	if e := r.srv.Ephemerals()[0]; !strings.Contains(e.Text, "Model:") || e.ResponseType != "ephemeral" {
		t.Fatalf("answer = %+v", e)
	}
	odd := slacktest.Envelope{Payload: []byte(`{"type":"event_callback","event_id":"Ev9","event":{"type":"no_such_event"}}`)}
	if code, _ := slacktest.PostEvent(t, url, odd, sig); code != 200 {
		t.Fatalf("unknown event: %d; want 200 (acknowledged, not retried)", code)
	}
	if code, _ := slacktest.PostEvent(t, url, r.srv.DM("bob", "hi there", ""), sig); code != 200 {
		t.Fatal("DM refused")
	}
	if p := r.srv.WaitPosts(t, 1, wait)[0]; p.Channel != slacktest.DMChannel("bob") || p.ThreadTS != "" {
		t.Fatalf("DM answered with %+v", p)
	}
	if !strings.Contains(r.logs.String(), "Slack event not understood; acknowledged and dropped") {
		t.Error("the unknown event was not logged")
	}
}

// failingSink refuses every commit.
type failingSink struct{ sinkRecorder }

func (*failingSink) Accept(context.Context, core.Inbound) error {
	return errors.New("database is locked")
}

// TestEventsHandlerLimits: an event the gateway could not commit is
// answered 500 (Slack delivers it again); a body over the limit is refused.
func TestEventsHandlerLimits(t *testing.T) {
	srv := slacktest.New(t, botToken, appToken)
	b := newBot(t, srv, eventsMode, nil)
	h := httptest.NewServer(b.EventsHandler(context.Background(), &failingSink{}))
	defer h.Close()
	sig := slacktest.Signed{Secret: signingSecret}
	if code, _ := slacktest.PostEvent(t, h.URL, srv.DM("alice", "hello", ""), sig); code != http.StatusInternalServerError {
		t.Fatalf("uncommitted event: %d; want 500", code)
	}
	huge := slacktest.Envelope{Payload: []byte(`{"type":"event_callback","pad":"` + strings.Repeat("x", 2<<20) + `"}`)}
	if code, _ := slacktest.PostEvent(t, h.URL, huge, sig); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MB body: %d; want 413", code)
	}
	resp, err := http.Get(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d; want 405", resp.StatusCode)
	}
}

// TestRefusedSignatureNamesTheFix: every refused request is logged with
// what to check: a wrong signature names channels.slack.signing_secret, a
// stale one the clock, an unsigned one the sender or a proxy.
func TestRefusedSignatureNamesTheFix(t *testing.T) {
	r, url := eventsRig(t)
	for _, tt := range []struct {
		name string
		post func()
		want string
	}{
		{"wrong secret", func() {
			slacktest.PostEvent(t, url, r.srv.Mention("alice", "C1", "x", ""), slacktest.Signed{Secret: "not-the-secret"})
		}, "set channels.slack.signing_secret to the app's Signing Secret"},
		{"stale", func() {
			slacktest.PostEvent(t, url, r.srv.Mention("alice", "C1", "y", ""), slacktest.Signed{Secret: signingSecret, At: time.Now().Add(-10 * time.Minute)})
		}, "over 5 minutes from this machine's clock"},
		{"unsigned", func() {
			resp, err := http.Post(url, "application/json", strings.NewReader(`{"type":"event_callback"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}, "the request is not from Slack, or a proxy in front drops these headers"},
	} {
		tt.post() // the refusal is logged before it is answered
		if !strings.Contains(r.logs.String(), tt.want) {
			t.Errorf("%s: the log does not say %q:\n%s", tt.name, tt.want, r.logs.String())
		}
	}
}
