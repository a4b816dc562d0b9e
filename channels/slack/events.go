package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// maxEventBody bounds one Events API request; Slack's are a few KB.
const maxEventBody = 1 << 20

// Header names of the Events API.
const (
	retryNumHeader = "X-Slack-Retry-Num"
)

// runEvents serves the Events API endpoint (events.listen, events.path)
// until ctx ends. Slack posts events and slash commands there; each is
// answered 200 once committed, fast, as Slack wants within 3 seconds.
func (b *Bot) runEvents(ctx context.Context, sink core.Sink) error {
	ev := b.cfg.Events
	mux := http.NewServeMux()
	mux.Handle(ev.Path, b.EventsHandler(ctx, sink))
	limits := toolkit.ServerLimits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 15 * time.Second, Idle: time.Minute, Body: maxEventBody}
	err := b.endpoint.Serve(ctx, "channels.slack.events.listen", ev.Listen, mux, limits, func(addr net.Addr) error {
		b.health.Connected()
		b.log.Info("Slack Events API endpoint listening", "listen", addr.String(), "path", ev.Path)
		return nil
	})
	if err != nil && core.ErrorKind(err) != core.KindInvalid {
		b.health.Failed(err)
	}
	return err
}

// EventsAddr waits until the Events API server listens and returns its
// address (useful with events.listen "127.0.0.1:0").
func (b *Bot) EventsAddr(ctx context.Context) (net.Addr, error) { return b.endpoint.Addr(ctx) }

// EventsHandler is the HTTP handler of the Events API endpoint: 401
// without a valid, fresh signature (signing_secret), the challenge for
// url_verification, 500 when the gateway could not commit an event
// (Slack delivers it again), else 200.
func (b *Bot) EventsHandler(ctx context.Context, sink core.Sink) http.Handler {
	secret := b.cfg.SigningSecret.Value()
	b.useSink(sink)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEventBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			b.log.Warn("Events API request with a missing, wrong or stale signature dropped", "remote", r.RemoteAddr, "err", err, "fix", signatureHint(err))
			http.Error(w, "bad or stale X-Slack-Signature (channels.slack.signing_secret)", http.StatusUnauthorized)
			return
		}
		hctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			b.serveForm(hctx, sink, w, body)
			return
		}
		b.serveEvent(hctx, sink, w, r, body)
	})
}

// serveEvent answers one JSON Events API request.
func (b *Bot) serveEvent(ctx context.Context, sink core.Sink, w http.ResponseWriter, r *http.Request, body []byte) {
	var outer struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
		EventID   string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		b.log.Warn("Events API body is not JSON; dropped", "err", err)
		http.Error(w, "not a Slack event", http.StatusBadRequest)
		return
	}
	switch outer.Type {
	case slackevents.URLVerification:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": outer.Challenge})
		return
	case slackevents.CallbackEvent:
	case slackevents.AppRateLimited:
		b.log.Warn("Slack is rate limiting the app's event subscriptions: some events were not delivered")
		return
	default:
		b.log.Warn("Events API request of an unknown type acknowledged and dropped", "type", outer.Type)
		return
	}
	b.health.Event()
	if n := r.Header.Get(retryNumHeader); n != "" && n != "0" && b.committed.Has(outer.EventID) {
		b.log.Debug("redelivered event already committed", "event_id", outer.EventID, "retry", n)
		return
	}
	api, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		b.log.Warn("Slack event not understood; acknowledged and dropped", "event_id", outer.EventID, "err", err)
		return
	}
	if err := b.handleEvent(ctx, sink, outer.EventID, api.InnerEvent); err != nil {
		b.log.Warn("event not committed; Slack will deliver it again", "event_id", outer.EventID, "err", err)
		http.Error(w, "not committed, retry", http.StatusInternalServerError)
		return
	}
	b.committed.Add(outer.EventID)
}

// serveForm answers a form-encoded request: a slash command (an
// interactive payload is acknowledged and not answered).
func (b *Bot) serveForm(ctx context.Context, sink core.Sink, w http.ResponseWriter, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	b.health.Event()
	if form.Get("payload") != "" {
		b.log.Debug("interactive payload ignored")
		return
	}
	if form.Get("command") == "" {
		b.log.Warn("form request without a command dropped")
		http.Error(w, "no command", http.StatusBadRequest)
		return
	}
	cmd := slack.SlashCommand{
		TeamID: form.Get("team_id"), ChannelID: form.Get("channel_id"), ChannelName: form.Get("channel_name"),
		UserID: form.Get("user_id"), UserName: form.Get("user_name"), Command: form.Get("command"),
		Text: form.Get("text"), ResponseURL: form.Get("response_url"), TriggerID: form.Get("trigger_id"),
	}
	refusal, err := b.handleSlash(ctx, sink, cmd, "")
	if err != nil {
		// Slack does not send a slash command again: tell the user.
		b.log.Warn("slash command not committed", "command", cmd.Command, "err", err)
		refusal = "Sorry, I could not take that command just now; please try again."
	}
	if refusal != "" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ephemeralPayload(refusal))
	}
}

// signatureHint says what to check when a request's signature is refused.
func signatureHint(err error) string {
	switch {
	case errors.Is(err, slack.ErrInvalidSignature):
		return "if Slack's own requests fail so, set channels.slack.signing_secret to the app's Signing Secret (Basic Information → App Credentials; not the Verification Token or Client Secret)"
	case errors.Is(err, slack.ErrExpiredTimestamp):
		return "the request's timestamp is over 5 minutes from this machine's clock: if Slack's own requests fail so, set the clock right (NTP)"
	case errors.Is(err, slack.ErrMissingHeaders):
		return "no X-Slack-Signature or X-Slack-Request-Timestamp: the request is not from Slack, or a proxy in front drops these headers"
	}
	return "check channels.slack.signing_secret"
}
