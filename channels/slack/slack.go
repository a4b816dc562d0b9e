package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// Name is the channel id.
const Name = "slack"

// MaxMessage is the size of one reply part: Slack advises at most 4,000
// characters per message; the margin keeps every part under it.
const MaxMessage = 3900

// Options configure a Bot. Only Config is required.
type Options struct {
	Config config.Slack
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Sleep waits d or until ctx ends (default: a real timer). Tests
	// replace it to see the waits without taking them.
	Sleep func(ctx context.Context, d time.Duration) error
	// HTTPClient is used for every Web API request (default: a client
	// with a 30s timeout).
	HTTPClient *http.Client
	// SendGap is the steady pause between two messages to the same channel
	// after a burst of 3 (default 1s, Slack's guidance for
	// chat.postMessage); negative turns pacing off.
	SendGap time.Duration
	// Quiet is how long a Socket Mode connection may deliver nothing, no
	// envelope and no ping, before it is recycled (default 2 minutes).
	Quiet time.Duration
	// AuthRetry is how often a credential Slack refused after the channel
	// had worked is tried again (default 30s); the channel reports it in
	// /readyz meanwhile.
	AuthRetry time.Duration
	// UnhealthyAfter is how long the channel may fail to connect before
	// Healthy reports it (default 1 minute).
	UnhealthyAfter time.Duration
	// HoldSlot, when set, runs the Socket Mode connection only while this
	// replica holds one of the app's connection slots (leases named
	// prefix + "0" … prefix + "9": Slack allows 10 connections per app
	// and gives each event to one of them); replicas beyond ten stand by
	// for a slot. cmd/opentalon wires it to core/lease. Nil: this process
	// connects itself.
	HoldSlot HoldSlotFunc
}

// SocketSlots is how many Socket Mode connections Slack allows one app.
const SocketSlots = 10

// HoldSlotFunc runs work while this replica holds one of slots leases
// named prefix+"0" … prefix+(slots-1), waiting for a free one, until ctx
// ends; work's context ends when the slot's lease is lost, and work
// returns an error to take a slot again.
type HoldSlotFunc func(ctx context.Context, prefix string, slots int, work func(ctx context.Context) error) error

// Bot is the Slack channel. Build it with New; Run connects.
type Bot struct {
	o        Options
	cfg      config.Slack
	log      *slog.Logger
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	http     *http.Client
	api      *slack.Client
	scrubber toolkit.Scrubber

	users, chats toolkit.Access
	trigger      toolkit.Trigger
	reactions    toolkit.Reactions
	pace         toolkit.Pace
	health       *toolkit.Health

	// committed holds the ids of events already committed, so a
	// redelivery Slack marks as a retry is acknowledged without work.
	committed *toolkit.Recent
	// answered holds "<channel>:<thread ts>" of threads the bot posted
	// in; notOurs the threads checked and found without it; seen the
	// threads whose earlier messages the bot already has.
	answered, notOurs, seen *toolkit.Recent

	mu        sync.Mutex
	me        identity
	worked    bool                // auth.test accepted the bot token once
	socketOK  bool                // Socket Mode connected once
	credErr   map[string]error    // config key → why Slack refuses it, for Healthy
	names     map[string]profile  // users.info, by user id
	responses map[string]response // slash command message id → response_url
	// ledger and keeper are the sink's capabilities beyond Accept (the
	// gateway's, over the database replicas share), when it has them.
	ledger    core.ReplyLedger
	keeper    core.CredentialKeeper
	threads   core.ThreadLedger
	endpoint  toolkit.Endpoint // the Events API endpoint (mode events)
	closeOnce sync.Once
	ackWarned bool // a refused ack reaction was logged as a warning
}

// identity is who the bot is in the workspace (auth.test).
type identity struct {
	UserID, BotID, TeamID, Name string
}

// response is where a slash command's answer may go.
type response struct {
	url string
	at  time.Time
}

var (
	_ core.Channel        = (*Bot)(nil)
	_ core.Indicator      = (*Bot)(nil)
	_ core.HealthReporter = (*Bot)(nil)
)

// New builds the channel from its config section (config.Default gives
// every key its default) without touching the network. It fails when the
// config cannot work: a token its mode needs is missing, a bad api_url.
func New(o Options) (*Bot, error) {
	cfg := o.Config
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = toolkit.Sleep
	}
	if o.HTTPClient == nil {
		o.HTTPClient = toolkit.NewHTTPClient(30 * time.Second)
	}
	if o.SendGap == 0 {
		o.SendGap = time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 2 * time.Minute
	}
	if o.AuthRetry <= 0 {
		o.AuthRetry = 30 * time.Second
	}
	b := &Bot{
		o: o, cfg: cfg, now: o.Now, sleep: o.Sleep, http: o.HTTPClient,
		log:       o.Logger.With("component", "channel", "channel", Name),
		scrubber:  toolkit.NewScrubber(append([]string{cfg.BotToken.Value(), cfg.AppToken.Value(), cfg.SigningSecret.Value()}, core.URLSecrets(cfg.APIURL)...)...),
		users:     toolkit.NewAccess(cfg.PlatformUsers(), nil),
		chats:     toolkit.NewAccess(cfg.AllowChats, nil),
		trigger:   toolkit.Trigger(cfg.Trigger),
		reactions: toolkit.NewReactions(cfg.Reactions),
		pace: toolkit.Pace{
			// Slack's limit is per channel, groups or not.
			Pacer: toolkit.NewPacer(toolkit.PacerOptions{Gap: o.SendGap, GroupGap: o.SendGap, Now: o.Now}),
			Sleep: o.Sleep,
		},
		health:    toolkit.NewHealth(Name, o.UnhealthyAfter, o.Now),
		committed: toolkit.NewRecent(10000),
		answered:  toolkit.NewRecent(10000),
		notOurs:   toolkit.NewRecent(10000),
		seen:      toolkit.NewRecent(10000),
		names:     map[string]profile{},
		credErr:   map[string]error{},
		responses: map[string]response{},
	}
	b.api = slack.New(cfg.BotToken.Value(),
		slack.OptionAPIURL(cfg.APIURL),
		slack.OptionHTTPClient(o.HTTPClient),
		slack.OptionAppLevelToken(cfg.AppToken.Value()),
	)
	return b, nil
}

// checkConfig repeats the checks of config validation New cannot do
// without (a Bot may be built from a config that was never validated).
func checkConfig(cfg config.Slack) error {
	if !cfg.BotToken.IsSet() {
		return core.Errorf(core.KindInvalid, "channels.slack.bot_token is empty: set it to the bot token (xoxb-…), e.g. bot_token: \"${SLACK_BOT_TOKEN}\"")
	}
	switch cfg.Mode {
	case config.SlackModeSocket:
		if !strings.HasPrefix(cfg.AppToken.Value(), "xapp-") {
			return core.Errorf(core.KindInvalid, "channels.slack.app_token must be an app-level token (xapp-…) in mode socket; or use mode: events with a signing_secret")
		}
	case config.SlackModeEvents:
		if !cfg.SigningSecret.IsSet() {
			return core.Errorf(core.KindInvalid, "channels.slack.signing_secret is empty: mode events needs the app's signing secret")
		}
	default:
		return core.Errorf(core.KindInvalid, "channels.slack.mode %q is unknown; use socket or events", cfg.Mode)
	}
	if !strings.HasPrefix(cfg.APIURL, "http://") && !strings.HasPrefix(cfg.APIURL, "https://") {
		return core.Errorf(core.KindInvalid, "channels.slack.api_url %q is not an http(s) URL; use the Web API base, e.g. https://slack.com/api/", core.RedactURL(cfg.APIURL))
	}
	return nil
}

// Name implements core.Channel.
func (b *Bot) Name() string { return Name }

// Run implements core.Channel: it checks the bot token with auth.test,
// then receives events by Socket Mode or on the Events API endpoint
// until ctx ends. A token Slack refuses at the first start is fatal
// (KindAuth, naming the config key); refused later (revoked while
// running), it is reported by Healthy and tried again every AuthRetry.
func (b *Bot) Run(ctx context.Context, sink core.Sink) error {
	b.useSink(sink)
	b.health.Starting()
	for {
		err := b.authTest(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			if core.ErrorKind(err) == core.KindAuth && !b.hasWorked() {
				return err // refused as the stop came: the start failed all the same
			}
			return nil
		}
		if core.ErrorKind(err) != core.KindAuth {
			return fmt.Errorf("slack auth.test at %s: %w", core.RedactURL(b.cfg.APIURL), err)
		}
		if !b.hasWorked() {
			return err
		}
		if b.waitAfterRefusal(ctx, keyBotToken, err) != nil {
			return nil
		}
	}
	me := b.identity()
	b.log.Info("connected to Slack", "bot_user", me.UserID, "team", me.TeamID, "mode", b.cfg.Mode)
	if b.cfg.Mode == config.SlackModeEvents {
		return b.runEvents(ctx, sink)
	}
	return b.runSocket(ctx, sink)
}

// useSink takes what the sink can do beyond Accept: tell whether the bot
// answered in a thread, keep a response_url for another replica.
func (b *Bot) useSink(sink core.Sink) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ledger, _ = sink.(core.ReplyLedger)
	b.keeper, _ = sink.(core.CredentialKeeper)
	b.threads, _ = sink.(core.ThreadLedger)
}

// threadLedger returns the sink's core.ThreadLedger (nil when it has
// none).
func (b *Bot) threadLedger() core.ThreadLedger {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.threads
}

// sinkCaps returns the sink's capabilities (nil when it has none).
func (b *Bot) sinkCaps() (core.ReplyLedger, core.CredentialKeeper) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ledger, b.keeper
}

// authTest asks Slack who the bot is.
func (b *Bot) authTest(ctx context.Context) error {
	r, err := b.api.AuthTestContext(ctx)
	if err != nil {
		return b.classify("auth.test", keyBotToken, err)
	}
	b.mu.Lock()
	b.me = identity{UserID: r.UserID, BotID: r.BotID, TeamID: r.TeamID, Name: r.User}
	b.worked = true
	b.mu.Unlock()
	b.credentialWorks(keyBotToken)
	return nil
}

// waitAfterRefusal reports the credential at key Slack refused after it
// had worked and waits before the next try; it returns ctx's error when
// ctx ends.
func (b *Bot) waitAfterRefusal(ctx context.Context, key string, err error) error {
	b.refused(key, err)
	b.log.Error("Slack refused a credential that worked before: it was revoked or replaced; set the new one and restart. Retrying", "in", b.o.AuthRetry, "err", err)
	return b.sleep(ctx, b.o.AuthRetry)
}

// Format implements core.Channel: Markdown → mrkdwn parts under 4,000
// characters, code blocks closed and reopened across parts.
func (b *Bot) Format(text string) []string {
	parts := textfmt.SplitSlackMrkdwn(textfmt.ToSlackMrkdwn(text), MaxMessage)
	if len(parts) == 0 {
		// Slack refuses empty messages; say something rather than nothing.
		parts = []string{"(empty answer)"}
	}
	return parts
}

// Healthy implements core.HealthReporter: a refused credential, else the
// connection's health.
func (b *Bot) Healthy() error {
	b.mu.Lock()
	var refused []error
	for _, key := range []string{keyBotToken, keyAppToken} {
		if err := b.credErr[key]; err != nil {
			refused = append(refused, err)
		}
	}
	b.mu.Unlock()
	if len(refused) > 0 {
		return errors.Join(refused...)
	}
	return b.health.Healthy()
}

// LastEvent implements core.HealthReporter.
func (b *Bot) LastEvent() time.Time { return b.health.LastEvent() }

// ConnectedAt implements core.ConnectionReporter.
func (b *Bot) ConnectedAt() time.Time { return b.health.ConnectedAt() }

// Close implements core.Channel: it drops the idle Web API connections.
// It may be called more than once.
func (b *Bot) Close() error {
	b.closeOnce.Do(b.http.CloseIdleConnections)
	return nil
}

func (b *Bot) identity() identity {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.me
}

// botName is the bot's user name as auth.test gave it, for the hints
// that tell the operator to invite it.
func (b *Bot) botName() string {
	if n := b.identity().Name; n != "" {
		return n
	}
	return "<your app>"
}

func (b *Bot) hasWorked() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.worked
}

// The config keys of the two tokens.
const (
	keyBotToken = "channels.slack.bot_token"
	keyAppToken = "channels.slack.app_token"
)

// credentialWorks records a call Slack accepted with the credential at key.
func (b *Bot) credentialWorks(key string) {
	b.mu.Lock()
	delete(b.credErr, key)
	b.mu.Unlock()
}

// refused records that Slack refuses the credential at key, for Healthy.
func (b *Bot) refused(key string, err error) {
	b.mu.Lock()
	b.credErr[key] = fmt.Errorf("%s: %w", Name, err)
	b.mu.Unlock()
}

// authErrors are the error codes by which Slack refuses a token.
var authErrors = map[string]bool{
	"invalid_auth": true, "account_inactive": true, "token_revoked": true,
	"not_authed": true, "token_expired": true, "not_allowed_token_type": true,
}

// transientErrors are ok:false codes worth trying again later.
var transientErrors = map[string]bool{
	"internal_error": true, "fatal_error": true, "service_unavailable": true,
	"request_timeout": true, "ratelimited": true,
}

// classify gives a Web API error its core kind, with the config key to fix
// where the credential is the cause, and scrubs the secrets from it. key
// is the config key of the token the call used.
func (b *Bot) classify(method, key string, err error) error {
	err = b.scrubber.Error(err)
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &rl):
		return &core.Error{Kind: core.KindRateLimited, Msg: "slack " + method + ": rate limited", Err: err, RetryAfter: rl.RetryAfter}
	case errors.As(err, &se) && authErrors[se.Err]:
		return &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("slack %s: %s: Slack refused the token; check %s", method, se.Err, key), Err: err}
	case errors.As(err, &se) && se.Err == "missing_scope" && key == keyAppToken:
		// The app-level token's scopes are chosen when it is made, not
		// under OAuth & Permissions.
		return &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("slack %s: missing_scope: the app-level token lacks connections:write; generate one with that scope (Basic Information → App-Level Tokens) and set it in %s", method, key), Err: err}
	case errors.As(err, &se) && se.Err == "missing_scope":
		scope := se.Needed
		if scope == "" {
			scope = "the scope " + method + " needs"
		}
		return &core.Error{Kind: core.KindBadRequest, Msg: fmt.Sprintf("slack %s: missing_scope: add %s to the app's Bot Token Scopes (OAuth & Permissions) and reinstall it", method, scope), Err: err}
	case errors.As(err, &se) && se.Err == "not_in_channel":
		return &core.Error{Kind: core.KindBadRequest, Msg: fmt.Sprintf("slack %s: not_in_channel: the bot is not a member of this channel; invite it there (/invite @%s)", method, b.botName()), Err: err}
	case errors.As(err, &se) && se.Err == "channel_not_found":
		return &core.Error{Kind: core.KindBadRequest, Msg: fmt.Sprintf("slack %s: channel_not_found: no such channel id, or a private channel the bot is not in (invite it: /invite @%s); a schedule's chat takes the channel id (C…), not its name", method, b.botName()), Err: err}
	case errors.As(err, &se) && se.Err == "is_archived":
		// The channel was archived: it takes no more messages, and its
		// answers are dropped (core.ErrRecipientGone).
		return &core.Error{Kind: core.KindBadRequest, Msg: fmt.Sprintf("slack %s: is_archived: the channel was archived", method), Err: fmt.Errorf("%w: %w", core.ErrRecipientGone, err)}
	case errors.As(err, &se) && transientErrors[se.Err]:
		return &core.Error{Kind: core.KindUnavailable, Msg: "slack " + method + ": " + se.Err, Err: err}
	case errors.As(err, &se):
		return &core.Error{Kind: core.KindBadRequest, Msg: "slack " + method + ": " + se.Err, Err: err}
	case errors.As(err, &sc) && (sc.Code == http.StatusUnauthorized || sc.Code == http.StatusForbidden):
		return &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("slack %s: HTTP %d: check %s", method, sc.Code, key), Err: err}
	case errors.As(err, &sc) && sc.Code == http.StatusNotFound:
		return &core.Error{Kind: core.KindInvalid, Msg: fmt.Sprintf("slack %s: HTTP 404: is channels.slack.api_url %s the Web API base?", method, core.RedactURL(b.cfg.APIURL)), Err: err}
	}
	return &core.Error{Kind: core.KindUnavailable, Msg: "slack " + method + " failed", Err: err}
}

// slackCode returns Slack's error code of an ok:false answer, or "".
func slackCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}

// ids: a Slack message is identified by its channel and ts; the platform
// id handed to core is "<channel>:<ts>".
func platformID(channel, ts string) string { return channel + ":" + ts }

func parsePlatformID(id string) (channel, ts string, ok bool) {
	channel, ts, ok = strings.Cut(id, ":")
	return channel, ts, ok && channel != "" && ts != ""
}

// parseTS turns a Slack ts ("1700000000.000100") into a time; the zero
// time when it is unreadable.
func parseTS(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s <= 0 {
		return time.Time{}
	}
	var us int64
	if frac != "" {
		us, _ = strconv.ParseInt((frac + "000000")[:6], 10, 64)
	}
	return time.Unix(s, us*1000)
}

// CheckCredential implements core.CredentialChecker: auth.test with the
// bot token and, in mode socket, apps.connections.open with the app
// token (it hands out a connection URL, which is left unused).
func (b *Bot) CheckCredential(ctx context.Context) (string, error) {
	if err := b.authTest(ctx); err != nil {
		return "", err
	}
	if b.cfg.Mode == config.SlackModeSocket {
		if _, _, err := b.api.StartSocketModeContext(ctx); err != nil {
			return "", b.classify("apps.connections.open", keyAppToken, err)
		}
	}
	return "@" + b.identity().Name, nil
}

var _ core.CredentialChecker = (*Bot)(nil)
