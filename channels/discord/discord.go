package discord

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// Name is the channel id.
const Name = config.ChannelDiscord

// MaxMessage is the size of one reply part: under Discord's limit of
// 2,000 characters (textfmt.DiscordLimit), as issue 11 asks. Text with
// no break point in it used to fill parts to exactly 2,000.
const MaxMessage = textfmt.DiscordLimit - 1

// Options configure a Bot. Only Config is required.
type Options struct {
	Config config.Discord
	Logger *slog.Logger
	// Now is the clock of health and events (default time.Now).
	Now func() time.Time
	// Sleep waits d or until ctx ends (default: a real timer): the waits
	// between reconnects and between send retries. Tests shorten them.
	Sleep func(ctx context.Context, d time.Duration) error
	// HTTPClient is copied for every REST request and gateway discovery;
	// its transport is wrapped by the api_url rewrite (default: a client
	// with a 20s timeout and its own transport).
	HTTPClient *http.Client
	// TypingEvery repeats the typing indicator (default 8s; Discord shows
	// it for 10s).
	TypingEvery time.Duration
	// HeartbeatInterval is the gateway heartbeat interval assumed until
	// one is measured (default 45s; Discord's is 41.25s). A connection
	// without a heartbeat ACK for two intervals is dropped and resumed.
	HeartbeatInterval time.Duration
	// SendAttempts is how often one REST call of a reply is tried when
	// it fails transiently (default 4).
	SendAttempts int
	// ResumeAttempts is how many failed reconnects resume the session
	// before the next one identifies afresh (default 2).
	ResumeAttempts int
	// IdentifyInterval is the least time between two IDENTIFYs of one
	// max_concurrency bucket (default 5s, Discord's rule).
	IdentifyInterval time.Duration
	// HoldShard, when set, runs each gateway shard only while this
	// replica holds the shard's lease, "discord:<app id>:shard:<n>"
	// (core/lease's Elector on PostgreSQL, wired by cmd/opentalon); the
	// lease's data keeps the session id, sequence and resume URL, so the
	// next holder resumes the session. Nil: this process runs every shard.
	HoldShard HoldShardFunc
}

// baseIntents are the gateway intents the bot always asks for; the
// privileged message content intent is added and dropped when Discord
// refuses it (close code 4014).
const baseIntents = discordgo.IntentGuildMessages | discordgo.IntentDirectMessages |
	discordgo.IntentGuildMessageReactions | discordgo.IntentDirectMessageReactions

// Bot is the Discord channel. Build it with New; Run connects.
type Bot struct {
	// typing holds the working indicators by channel, so a message posted
	// there quiets them first (post, Upload).
	typing   toolkit.Indicators
	o        Options
	cfg      config.Discord
	log      *slog.Logger
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	root     *url.URL
	http     *http.Client
	token    string
	scrubber toolkit.Scrubber
	// rest makes every REST call; it is never connected to the gateway,
	// so its rate limit buckets outlive reconnects.
	rest *discordgo.Session

	users, chats, guilds toolkit.Access
	trigger              toolkit.Trigger
	reactions            toolkit.Reactions
	health               *toolkit.Health
	chans                *cache[chanInfo]
	roles                *cache[roleInfo]
	interactions         *interactionTokens

	// background holds the ack reactions under way; Close waits for
	// them.
	background sync.WaitGroup

	mu        sync.Mutex
	reacting  map[string]bool      // channels with an ack reaction under way
	ackWarned bool                 // a refused ack reaction was logged as a warning
	told      map[string]time.Time // what a private answer's parts did once, and when (sendPrivately)
	me        discordgo.User
	appID     string
	sessionID string
	// keeper keeps interaction tokens sealed in the database, so another
	// replica answers a command in place (the sink's, when it can).
	keeper    core.CredentialKeeper
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
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cfg.Token.Value()), "Bot "))
	if token == "" {
		return nil, core.Errorf(core.KindInvalid, "channels.discord.token is empty: set it to the bot token from the Discord developer portal (Applications → your app → Bot), e.g. token: \"${DISCORD_BOT_TOKEN}\"")
	}
	root, err := apiRoot(cfg.APIURL)
	if err != nil {
		return nil, err
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
	if o.TypingEvery <= 0 {
		o.TypingEvery = 8 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 45 * time.Second
	}
	if o.SendAttempts <= 0 {
		o.SendAttempts = 4
	}
	if o.ResumeAttempts <= 0 {
		o.ResumeAttempts = 2
	}
	if o.IdentifyInterval <= 0 {
		o.IdentifyInterval = identifyEvery
	}
	b := &Bot{
		o: o, cfg: cfg, now: o.Now, sleep: o.Sleep, root: root, token: token,
		log:          o.Logger.With("component", "channel", "channel", Name),
		http:         newHTTPClient(root, o.HTTPClient),
		scrubber:     toolkit.NewScrubber(append([]string{token}, core.URLSecrets(cfg.APIURL)...)...),
		users:        toolkit.NewAccess(cfg.PlatformUsers(), toolkit.Digits),
		chats:        toolkit.NewAccess(cfg.AllowChats, toolkit.Digits),
		guilds:       toolkit.NewAccess(cfg.AllowGuilds, toolkit.Digits),
		trigger:      toolkit.Trigger(cfg.Trigger),
		reactions:    toolkit.NewReactions(cfg.Reactions),
		health:       toolkit.NewHealth(Name, 0, o.Now),
		chans:        newCache[chanInfo](),
		roles:        newCache[roleInfo](),
		interactions: newInteractionTokens(),
		reacting:     map[string]bool{},
		told:         map[string]time.Time{},
	}
	toolkit.WarnNames(b.log, "channels.discord.allow_users", b.users)
	b.rest = b.newSession()
	return b, nil
}

// newSession returns a discordgo session over the channel's HTTP client,
// with the library's own log and state off (the channel logs, and keeps
// only what it needs).
func (b *Bot) newSession() *discordgo.Session {
	s, _ := discordgo.New("Bot " + b.token) // New only fills a struct
	s.Client = b.http
	s.LogLevel = discordgo.LogError - 1
	s.StateEnabled = false
	s.ShouldReconnectOnError = false
	s.ShouldReconnectVoiceOnSessionError = false
	return s
}

// Name implements core.Channel.
func (b *Bot) Name() string { return Name }

// Format implements core.Channel: Discord renders Markdown itself; mass
// mentions are made inert and the text is cut under 2,000 characters,
// code fences closed and reopened across parts.
func (b *Bot) Format(text string) []string {
	parts := textfmt.SplitMarkdown(textfmt.ToDiscord(text), MaxMessage)
	if len(parts) == 0 {
		// Discord refuses empty messages; say something rather than nothing.
		parts = []string{"(empty answer)"}
	}
	return parts
}

// Healthy implements core.HealthReporter: nil while connected to the
// gateway.
func (b *Bot) Healthy() error { return b.health.Healthy() }

// LastEvent implements core.HealthReporter.
func (b *Bot) LastEvent() time.Time { return b.health.LastEvent() }

// ConnectedAt implements core.ConnectionReporter.
func (b *Bot) ConnectedAt() time.Time { return b.health.ConnectedAt() }

// Close implements core.Channel: it waits for the ack reactions being
// taken back and drops the idle REST connections (Run closes the gateway
// connection when its context ends). It may be called more than once.
func (b *Bot) Close() error {
	b.closeOnce.Do(func() {
		b.background.Wait()
		b.http.CloseIdleConnections()
	})
	return nil
}

// identity is what READY told about the bot.
func (b *Bot) identity() (me discordgo.User, appID, sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.me, b.appID, b.sessionID
}

// scrub removes the token from an error's text.
func (b *Bot) scrub(err error) error { return b.scrubber.Error(err) }

// CheckCredential implements core.CredentialChecker with GET /users/@me,
// then GET /oauth2/applications/@me, whose flags tell whether the
// Message Content intent is on in the developer portal: the bot's name
// says so when it is off.
func (b *Bot) CheckCredential(ctx context.Context) (string, error) {
	u, err := b.rest.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return "", b.classify("GET /users/@me", err)
	}
	app, err := b.rest.Application("@me")
	if err != nil || app == nil {
		return u.Username, nil // the token works; the flags are only a hint
	}
	if app.Flags&(appFlagMessageContent|appFlagMessageContentLimited) == 0 {
		note := "the bot reads only DMs and messages that mention it"
		if b.cfg.Trigger == config.TriggerAll {
			note = "trigger: all cannot work; " + note
		}
		return u.Username + "; but Message Content Intent is off (developer portal → your app → Bot → Privileged Gateway Intents): " + note, nil
	}
	return u.Username, nil
}

// The application flags of the Message Content intent: for a bot in 100
// servers or more (approved by Discord), and below that (a switch in the
// developer portal).
const (
	appFlagMessageContent        = 1 << 18
	appFlagMessageContentLimited = 1 << 19
)

var _ core.CredentialChecker = (*Bot)(nil)
