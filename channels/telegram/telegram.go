package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// Name is the channel id.
const Name = "telegram"

// MaxMessage is the size of one reply part: under Telegram's limit of
// 4,096 characters, as issue 3 asks ("split under 4096").
const MaxMessage = 4095

// allowedUpdates are the update kinds the bot asks Telegram for.
var allowedUpdates = []string{
	models.AllowedUpdateMessage,
	models.AllowedUpdateEditedMessage,
	models.AllowedUpdateMessageReaction,
	models.AllowedUpdateCallbackQuery,
}

// Options configure a Bot. Only Config is required.
type Options struct {
	Config config.Telegram
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Sleep waits d or until ctx ends (default: a real timer). Tests
	// replace it to see the waits without taking them.
	Sleep func(ctx context.Context, d time.Duration) error
	// HTTPClient is used for every request (default: a client with a
	// timeout longer than the long poll).
	HTTPClient *http.Client
	// PollTimeout is the long-poll wait of getUpdates (default 50s).
	PollTimeout time.Duration
	// TypingEvery repeats sendChatAction typing (default 4s; Telegram
	// shows it for about 5s).
	TypingEvery time.Duration
	// SendGap is the steady pause between two messages to the same
	// private chat after a burst of 3 (default 1s); groups get three
	// times as much (Telegram allows about 20 messages a minute in a
	// group). Negative turns per-chat pacing off.
	SendGap time.Duration
	// GlobalLimit bounds messages per second across all chats (default
	// channels.telegram.messages_per_second, else 30, Telegram's limit
	// for a bot; negative turns it off).
	GlobalLimit int
	// UnhealthyAfter is how long polling may fail before Healthy reports
	// it (default 1 minute).
	UnhealthyAfter time.Duration
	// Hold, when set, runs the bot's singleton work only while this
	// replica holds the lease "telegram:<bot id>" (core/lease's Elector,
	// wired by cmd/opentalon): in polling mode the polling, the last
	// committed offset kept in the lease's data; in webhook mode the
	// setWebhook call, so that of the replicas serving the webhook one
	// registers it. Nil: this process does both itself.
	Hold HoldFunc
}

// Lease is the lease the bot's singleton work runs under.
type Lease interface {
	// Data is what the last holder left (nil at first).
	Data(ctx context.Context) ([]byte, error)
	// SetData replaces it; an error when the lease is no longer held.
	SetData(ctx context.Context, data []byte) error
}

// HoldFunc runs work while this replica holds the lease name, campaigning
// for it when another replica holds it, until ctx ends. work's context
// ends when the lease is lost; work returns an error to campaign again.
type HoldFunc func(ctx context.Context, name string, work func(ctx context.Context, l Lease) error) error

// leaseName is the lease of a bot's poller (or webhook registration).
func leaseName(botID int64) string { return "telegram:" + strconv.FormatInt(botID, 10) }

// errLeaseLost ends work whose lease ended before the channel did.
var errLeaseLost = errors.New("telegram: the lease ended; campaigning again")

// held runs work under the bot's lease when Options.Hold is set, else
// at once. A work whose lease ended (ctx of the work done, the channel's
// not) reports it, so the Elector campaigns again.
func (b *Bot) held(ctx context.Context, work func(ctx context.Context, l Lease) error) error {
	if b.o.Hold == nil {
		return work(ctx, nil)
	}
	b.mu.Lock()
	id := b.me.ID
	b.mu.Unlock()
	// A replica standing by for the lease is healthy: /readyz of a
	// replica does not depend on the leases it holds.
	b.health.Connected()
	err := b.o.Hold(ctx, leaseName(id), func(lctx context.Context, l Lease) error {
		b.log.Info("this replica holds the Telegram lease", "lease", leaseName(id), "mode", b.cfg.Mode)
		err := work(lctx, l)
		if ctx.Err() == nil {
			b.health.Connected() // standing by again
			if err == nil {
				err = errLeaseLost
			}
		}
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// globalWindow is the window of the limit across chats: a second plus a
// margin, so that requests delayed unevenly on their way still arrive at
// no more than GlobalLimit in any second.
const globalWindow = 1100 * time.Millisecond

// Bot is the Telegram channel. Build it with New; Run connects.
type Bot struct {
	// typing holds the working indicators by chat and topic, so a reply
	// quiets them before it is sent (typingPlace).
	typing   toolkit.Indicators
	o        Options
	cfg      config.Telegram
	log      *slog.Logger
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	api      *tgbot.Bot
	http     *http.Client
	token    string
	scrubber toolkit.Scrubber

	users, chats toolkit.Access
	trigger      toolkit.Trigger
	reactions    toolkit.Reactions
	pace         toolkit.Pace
	health       *toolkit.Health

	mu        sync.Mutex
	me        models.User
	webhook   toolkit.Endpoint
	albums    webhookAlbums
	pastes    webhookAlbums // a webhook's split pastes (paste.go)
	merged    mergedPastes  // the pastes handed over, for their parts' edits
	closeOnce sync.Once
}

var (
	_ core.Channel        = (*Bot)(nil)
	_ core.Indicator      = (*Bot)(nil)
	_ core.HealthReporter = (*Bot)(nil)
)

// New builds the channel from its config section (config.Default gives
// every key its default) without touching the network. It fails when the
// config cannot work (no token, a bad api_url).
func New(o Options) (*Bot, error) {
	cfg := o.Config
	if !cfg.Token.IsSet() {
		return nil, core.Errorf(core.KindInvalid, "channels.telegram.token is empty: set it to the bot token from @BotFather, e.g. token: \"${TELEGRAM_BOT_TOKEN}\"")
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if !strings.HasPrefix(cfg.APIURL, "http://") && !strings.HasPrefix(cfg.APIURL, "https://") {
		return nil, core.Errorf(core.KindInvalid, "channels.telegram.api_url %q is not an http(s) URL; use the Bot API root, e.g. https://api.telegram.org", core.RedactURL(cfg.APIURL))
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
	if o.PollTimeout <= 0 {
		o.PollTimeout = 50 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = toolkit.NewHTTPClient(o.PollTimeout + 15*time.Second)
	}
	if o.TypingEvery <= 0 {
		o.TypingEvery = 4 * time.Second
	}
	if o.SendGap == 0 {
		o.SendGap = time.Second
	}
	if o.GlobalLimit == 0 {
		o.GlobalLimit = o.Config.MessagesPerSecond
	}
	if o.GlobalLimit == 0 {
		o.GlobalLimit = 30
	}
	b := &Bot{
		o: o, cfg: cfg, now: o.Now, sleep: o.Sleep, http: o.HTTPClient,
		log:       o.Logger.With("component", "channel", "channel", Name),
		token:     cfg.Token.Value(),
		scrubber:  toolkit.NewScrubber(append([]string{cfg.Token.Value(), cfg.Webhook.Secret.Value()}, core.URLSecrets(cfg.APIURL)...)...),
		users:     toolkit.NewAccess(cfg.PlatformUsers(), toolkit.Digits),
		chats:     toolkit.NewAccess(cfg.AllowChats, toolkit.Digits),
		trigger:   toolkit.Trigger(cfg.Trigger),
		reactions: toolkit.NewReactions(cfg.Reactions),
		pace: toolkit.Pace{
			Pacer:   toolkit.NewPacer(toolkit.PacerOptions{Gap: o.SendGap, Now: o.Now}),
			Limiter: toolkit.NewLimiter(o.GlobalLimit, globalWindow, o.Now),
			Sleep:   o.Sleep,
		},
		health: toolkit.NewHealth(Name, o.UnhealthyAfter, o.Now),
	}
	toolkit.WarnNames(b.log, "channels.telegram.allow_users", b.users)
	api, err := tgbot.New(b.token,
		tgbot.WithServerURL(cfg.APIURL),
		tgbot.WithSkipGetMe(),
		tgbot.WithHTTPClient(o.PollTimeout, wholeBodies{o.HTTPClient}),
		tgbot.WithErrorsHandler(func(err error) { b.log.Warn("telegram library error", "err", b.scrub(err)) }),
		tgbot.WithDefaultHandler(func(context.Context, *tgbot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, core.Errorf(core.KindInvalid, "channels.telegram: %s", b.scrub(err))
	}
	b.api = api
	return b, nil
}

// Name implements core.Channel.
func (b *Bot) Name() string { return Name }

// getMe asks who the token belongs to; a refused token is a KindAuth
// error naming the config key.
func (b *Bot) getMe(ctx context.Context) (*models.User, error) {
	me, err := b.api.GetMe(ctx)
	if err != nil {
		err = b.classify("getMe", err)
		if errors.Is(err, tgbot.ErrorUnauthorized) || errors.Is(err, tgbot.ErrorNotFound) {
			return nil, core.Errorf(core.KindAuth, "telegram refused the bot token (getMe: %s): check channels.telegram.token (from @BotFather) and channels.telegram.api_url", b.scrub(err))
		}
		return nil, fmt.Errorf("telegram getMe at %s: %w", core.RedactURL(b.cfg.APIURL), err)
	}
	return me, nil
}

// CheckCredential implements core.CredentialChecker with one getMe.
func (b *Bot) CheckCredential(ctx context.Context) (string, error) {
	me, err := b.getMe(ctx)
	if err != nil {
		return "", err
	}
	return "@" + me.Username, nil
}

// Run implements core.Channel: it checks the token with getMe, advertises
// the commands and receives updates until ctx ends.
func (b *Bot) Run(ctx context.Context, sink core.Sink) error {
	b.health.Starting()
	if b.cfg.Mode != config.ModeWebhook && b.o.Hold == nil {
		return b.runPolling(ctx, sink)
	}
	me, err := b.getMe(ctx)
	if err != nil {
		if ctx.Err() != nil && !core.Refusal(err) {
			return nil
		}
		return err
	}
	b.mu.Lock()
	b.me = *me
	b.mu.Unlock()
	b.log.Info("connected to Telegram", "bot", "@"+me.Username, "mode", b.cfg.Mode)
	// The command menu is advertised alongside the first poll rather
	// than before it: start-up waits for one round trip less.
	cmdsDone := make(chan struct{})
	go func() {
		defer close(cmdsDone)
		b.setCommands(ctx, sink.Commands())
	}()
	defer func() { <-cmdsDone }()
	if b.cfg.Mode == config.ModeWebhook {
		return b.runWebhook(ctx, sink)
	}
	return b.held(ctx, func(ctx context.Context, l Lease) error { return b.poll(ctx, sink, l, nil) })
}

// runPolling is Run for a bot that polls on its own (no lease to take
// first, whose name is the bot's id): getMe goes out beside the first
// getUpdates instead of before it, so a start waits one round trip to
// the Bot API less (on the internet the slowest step of a start). No
// update is handed over, nor a refusal of getUpdates told, before getMe
// has answered (a mention in a group is told by the bot's name), and a
// token getMe refuses ends the run with its error, as when it went
// first; updates fetched meanwhile were not confirmed, so Telegram sends
// them again.
func (b *Bot) runPolling(ctx context.Context, sink core.Sink) error {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	identified := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		me, err := b.getMe(pctx)
		if err != nil {
			cancel(err)
			return
		}
		b.mu.Lock()
		b.me = *me
		b.mu.Unlock()
		close(identified)
		b.log.Info("connected to Telegram", "bot", "@"+me.Username, "mode", b.cfg.Mode)
		b.setCommands(pctx, sink.Commands())
	}()
	err := b.poll(pctx, sink, nil, identified)
	cancel(nil)
	<-done
	cause := context.Cause(pctx)
	if ctx.Err() != nil {
		if core.Refusal(cause) {
			return cause // getMe's refusal, come with the stop: the start failed
		}
		return nil
	}
	if err == nil && !errors.Is(cause, context.Canceled) {
		return cause // getMe's
	}
	return err
}

// setCommands advertises core's commands (best effort).
func (b *Bot) setCommands(ctx context.Context, infos []core.CommandInfo) {
	var cmds []models.BotCommand
	for _, c := range infos {
		name := strings.ToLower(c.Name)
		if !validCommand(name) {
			continue
		}
		desc := c.Description
		if desc == "" {
			desc = c.Usage
		}
		if desc == "" {
			desc = name
		}
		if len(desc) > 256 {
			desc = desc[:256]
		}
		cmds = append(cmds, models.BotCommand{Command: name, Description: desc})
	}
	if len(cmds) == 0 {
		return
	}
	if _, err := b.api.SetMyCommands(ctx, &tgbot.SetMyCommandsParams{Commands: cmds}); err != nil {
		b.log.Warn("setMyCommands failed; commands still work but are not suggested", "err", b.scrub(err))
	}
}

func validCommand(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// Format implements core.Channel: Markdown → Telegram HTML parts.
func (b *Bot) Format(text string) []string {
	parts := textfmt.SplitHTML(textfmt.ToTelegramHTML(text), MaxMessage)
	if len(parts) == 0 {
		// Telegram refuses empty messages; say something rather than nothing.
		parts = []string{"(empty answer)"}
	}
	return parts
}

// Healthy implements core.HealthReporter.
func (b *Bot) Healthy() error { return b.health.Healthy() }

// LastEvent implements core.HealthReporter.
func (b *Bot) LastEvent() time.Time { return b.health.LastEvent() }

// ConnectedAt implements core.ConnectionReporter.
func (b *Bot) ConnectedAt() time.Time { return b.health.ConnectedAt() }

// Close implements core.Channel: it drops the idle connections to the
// Bot API. It may be called more than once.
func (b *Bot) Close() error {
	b.closeOnce.Do(b.http.CloseIdleConnections)
	return nil
}

func (b *Bot) botUser() models.User {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.me
}

// scrub removes the token, the webhook secret and api_url's credential
// from an error's text.
func (b *Bot) scrub(err error) error { return b.scrubber.Error(err) }

// classify gives a library error its core kind (and scrubs it).
func (b *Bot) classify(method string, err error) error {
	err = b.scrub(err)
	var tm *tgbot.TooManyRequestsError
	var mig *tgbot.MigrateError
	switch {
	case errors.As(err, &tm):
		return &core.Error{Kind: core.KindRateLimited, Msg: "telegram " + method + ": too many requests", Err: err, RetryAfter: time.Duration(tm.RetryAfter) * time.Second}
	case errors.As(err, &mig):
		return &core.Error{Kind: core.KindBadRequest, Msg: fmt.Sprintf("telegram %s refused: the group became a supergroup with chat id %d; the old chat id takes no more messages (a chat id in channels.telegram.allow_chats or a schedule needs the new one)", method, mig.MigrateToChatID), Err: err}
	case errors.Is(err, tgbot.ErrorUnauthorized):
		return &core.Error{Kind: core.KindAuth, Msg: "telegram " + method + ": the bot token was refused (channels.telegram.token)", Err: err}
	case errors.Is(err, tgbot.ErrorForbidden) && recipientGone(err):
		// The chat takes no more messages: its answers are dropped.
		return &core.Error{Kind: core.KindBadRequest, Msg: "telegram " + method + " refused", Err: fmt.Errorf("%w: %w", core.ErrRecipientGone, err)}
	case errors.Is(err, tgbot.ErrorBadRequest), errors.Is(err, tgbot.ErrorForbidden), errors.Is(err, tgbot.ErrorNotFound):
		return &core.Error{Kind: core.KindBadRequest, Msg: "telegram " + method + " refused", Err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return &core.Error{Kind: core.KindUnavailable, Msg: "telegram " + method + " failed", Err: err}
}

// goneForbidden are the words of Telegram's 403s that say the chat takes
// no more messages from the bot, whatever the operator does: the user
// blocked it or deleted their account, or the bot was removed from the
// group. Other 403s ("bot is not a member of the channel chat", "need
// administrator rights in the channel chat", "not enough rights to send
// text messages to the chat", "bot can't initiate conversation with a
// user") are the operator's to fix and stay errors they hear of.
var goneForbidden = []string{"bot was blocked by the user", "user is deactivated", "bot was kicked from"}

// recipientGone reports whether a 403 of Telegram's is one of
// goneForbidden.
func recipientGone(err error) bool {
	s := strings.ToLower(err.Error())
	return slices.ContainsFunc(goneForbidden, func(w string) bool { return strings.Contains(s, w) })
}

// ids: a Telegram message id is unique only within its chat, so platform
// ids handed to core are "<chat id>:<message id>".
func platformID(chat int64, msg int) string {
	return strconv.FormatInt(chat, 10) + ":" + strconv.Itoa(msg)
}

func parsePlatformID(id string) (chat int64, msg int, ok bool) {
	c, m, found := strings.Cut(id, ":")
	if !found {
		return 0, 0, false
	}
	chat, err1 := strconv.ParseInt(c, 10, 64)
	msg, err2 := strconv.Atoi(m)
	return chat, msg, err1 == nil && err2 == nil
}
