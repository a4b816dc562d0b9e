package config

import "slices"

// Config is the whole OpenTalon configuration. Its yaml tags are the key
// names of the config file; examples/config.yaml documents every key.
type Config struct {
	State        State        `yaml:"state"`
	Queue        Queue        `yaml:"queue"`
	Models       Models       `yaml:"models"`
	Routing      Routing      `yaml:"routing"`
	Auth         Auth         `yaml:"auth"`
	LLM          LLM          `yaml:"llm"`
	Channels     Channels     `yaml:"channels"`
	Plugins      Plugins      `yaml:"plugins"`
	Orchestrator Orchestrator `yaml:"orchestrator"`
	Server       Server       `yaml:"server"`
	// Timezone is the IANA time zone of schedules that name none; ""
	// is the machine's.
	Timezone string `yaml:"timezone"`
	// Schedules are scheduled tasks (see extensions.go).
	Schedules []Schedule `yaml:"schedules"`
	// Notifications sends operator events to sinks.
	Notifications Notifications `yaml:"notifications"`
	Media         Media         `yaml:"media"`
	// Cluster configures replicas over one PostgreSQL database.
	Cluster Cluster `yaml:"cluster"`
}

// Media configures the files users send: limits, the media store and
// voice transcription.
type Media struct {
	// MaxBytes bounds one file users send; a larger one is refused before
	// it is downloaded.
	MaxBytes int64 `yaml:"max_bytes"`
	// DownloadTimeout bounds one download from the platform.
	DownloadTimeout Duration `yaml:"download_timeout"`
	// Retention is how long a file unused is kept in <data_dir>/media.
	Retention Duration `yaml:"retention"`
	// DocumentTokens bounds the text one document adds to a turn.
	DocumentTokens int `yaml:"document_tokens"`
	// Transcription turns voice notes and audio into text.
	Transcription Transcription `yaml:"transcription"`
}

// Transcription configures speech to text.
type Transcription struct {
	// Model is a "<provider>/<model>" reference whose provider serves an
	// OpenAI-compatible /audio/transcriptions endpoint; "" = voice notes
	// are not understood.
	Model string `yaml:"model"`
	// Echo shows the transcript to the user ahead of the answer.
	Echo bool `yaml:"echo"`
}

// State says where durable state lives.
type State struct {
	// DataDir holds opentalon.db. "~" is expanded; a relative path is
	// resolved against the config file's directory.
	DataDir string `yaml:"data_dir"`
	// SessionTTL expires idle sessions; 0 keeps them forever.
	SessionTTL Duration `yaml:"session_ttl"`
	// Retention is how long finished queue rows are kept (also the window
	// in which a redelivered platform event is recognized as a
	// duplicate); 0 keeps them forever.
	Retention Duration `yaml:"retention"`
	// Compaction summarizes the oldest turns of a long conversation.
	Compaction Compaction `yaml:"compaction"`
	// Memory is long-term memory: facts and workflow patterns.
	Memory Memory `yaml:"memory"`
	// Driver is the database: DriverSQLite (<data_dir>/opentalon.db, the
	// default) or DriverPostgres (state.postgres.dsn, which several
	// replicas may share).
	Driver string `yaml:"driver"`
	// Postgres configures the PostgreSQL database of driver postgres.
	Postgres Postgres `yaml:"postgres"`
	// SealKey is the secret the short-lived platform credentials kept in
	// the database (a Discord interaction's token, a Slack slash
	// command's response_url) are sealed under (AES-256-GCM, the key
	// derived by HKDF-SHA256). Unset, the key is derived from the enabled
	// channels' own tokens, which every replica shares and the database
	// never holds. A secret, usually "${OPENTALON_SEAL_KEY}".
	SealKey Secret `yaml:"seal_key"`
}

// Cluster configures the replicas that share one PostgreSQL database
// (state.driver: postgres); on SQLite there is one process and these
// change nothing but the name on the status page.
type Cluster struct {
	// ReplicaID names this replica in the leases it holds, the queue
	// claims it takes and the status page; "" = host/pid/random, new at
	// every start. Each running replica needs its own: `run` refuses a
	// name a running replica uses (cmd/opentalon checkReplicaID).
	ReplicaID string `yaml:"replica_id"`
	// LeaseTTL is how long a singleton role (the scheduler, maintenance,
	// a Telegram poller, a Discord shard, a Slack socket slot) stays with
	// a replica that stopped renewing it; a graceful stop hands it over at
	// once.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// Heartbeat is how often a replica records that it is alive (the
	// status page's replicas).
	Heartbeat Duration `yaml:"heartbeat"`
}

// State drivers accepted in state.driver.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Postgres is the PostgreSQL database of state.driver: postgres.
type Postgres struct {
	// DSN names the server, database, user and password
	// (postgres://user:password@host:5432/opentalon, or the key=value
	// form); a secret, usually "${OPENTALON_POSTGRES_DSN}".
	DSN Secret `yaml:"dsn"`
	// PoolSize bounds the connections one replica opens, the one that
	// listens for new work included (so at least 2: with 1, its queries
	// still get one).
	PoolSize int `yaml:"pool_size"`
	// StatementTimeout cancels a statement that runs longer (0 = no
	// limit). Schema migrations, and a replica's wait for another's, run
	// without it (a migration's wait for a table's lock is bounded on its
	// own: store.migrationLockWait).
	StatementTimeout Duration `yaml:"statement_timeout"`
	// ConnectWait is how long `run` waits at start for a server that is
	// not up yet (it refuses connections, is starting or shutting down,
	// its host name does not resolve yet, or it is a standby not yet
	// promoted), retrying with backoff; 0 (the default) = fail at once
	// with an error naming state.postgres.dsn. deploy/config.replicas.yaml
	// sets 1m: a replica started beside its database waits for it.
	ConnectWait Duration `yaml:"connect_wait"`
}

// Compaction configures how a history too long for the model's context
// window is condensed.
type Compaction struct {
	// Model writes the summaries; "" = the cheapest catalog model.
	Model string `yaml:"model"`
	// Notify tells the user, once per conversation, that older turns were
	// summarized.
	Notify bool `yaml:"notify"`
}

// Memory configures long-term memory.
type Memory struct {
	// Tools offers memory_save, memory_search and memory_forget to the LLM.
	Tools bool `yaml:"tools"`
	// RecallTokens bounds the memories recalled into the system prompt of
	// each turn; 0 recalls none.
	RecallTokens int `yaml:"recall_tokens"`
	// Workflows is how many similar successful workflows are recalled as
	// past plans; 0 recalls none (and records none).
	Workflows int `yaml:"workflows"`
	// Admins ("<channel>:<user id>") may save memories shared with every
	// user.
	Admins []string `yaml:"admins"`
}

// Queue tunes the durable request queue and its workers.
type Queue struct {
	Workers        int      `yaml:"workers"`
	MaxAttempts    int      `yaml:"max_attempts"`
	RequestTimeout Duration `yaml:"request_timeout"`
	ShutdownGrace  Duration `yaml:"shutdown_grace"`
	// MaxPending caps the unfinished messages of one conversation; beyond
	// it a message is not queued and its sender is asked to wait.
	MaxPending int `yaml:"max_pending"`
	// MaxWait bounds how long a message waits while the provider is in
	// passing trouble (rate limits, 5xx, timeouts) before the user gets
	// the apology.
	MaxWait Duration `yaml:"max_wait"`
	// LeaseTTL is how long a claim holds a queue item: the gateway renews
	// it while it works; a claim not renewed for this long (its replica
	// died or hangs) is taken back and the item run again, counted as an
	// interruption.
	LeaseTTL Duration `yaml:"lease_ttl"`
}

// Models holds the LLM providers and the model catalog.
type Models struct {
	// Providers by id; the id is the prefix of a model reference
	// ("<provider>/<model>").
	Providers map[string]Provider `yaml:"providers"`
	// Catalog by model reference "<provider>/<model>".
	Catalog map[string]CatalogEntry `yaml:"catalog"`
}

// Provider API kinds accepted in models.providers.<id>.api.
const (
	APIOpenAICompletions = "openai-completions"
	APIAnthropicMessages = "anthropic-messages"
	// APIPlugin is an LLM provider served by a gRPC plugin (Provider.Plugin).
	APIPlugin = "plugin"
)

// Provider is one configured LLM endpoint.
type Provider struct {
	// API is APIOpenAICompletions or APIAnthropicMessages.
	API string `yaml:"api"`
	// BaseURL of the API; empty means the provider's public default.
	BaseURL string `yaml:"base_url"`
	APIKey  Secret `yaml:"api_key"`
	// Local marks a provider on this machine or network (Ollama, vLLM):
	// its calls use the llm.max_concurrent_local semaphore instead of the
	// cloud one. Unset, a base URL on a loopback or private address is
	// local (IsLocal); local: false says a provider there is not (a proxy
	// in front of a cloud API).
	Local   *bool    `yaml:"local"`
	Timeout Duration `yaml:"timeout"`
	// Headers are extra HTTP headers; they are treated as secrets because
	// they often carry credentials.
	Headers map[string]Secret `yaml:"headers"`
	Models  []ProviderModel   `yaml:"models"`
	// Plugin names the plugin that serves this provider (api: plugin).
	Plugin string `yaml:"plugin"`
	// KeyVar and URLVar name the environment variables a provider the
	// config did not give was made from (ANTHROPIC_API_KEY,
	// OPENAI_API_KEY, OPENAI_BASE_URL), so a message about its key or
	// its URL names what the user set (KeyVar: or would set, for a
	// server at OPENAI_BASE_URL that turns out to ask for a key); "" for
	// a configured provider.
	KeyVar string `yaml:"-"`
	URLVar string `yaml:"-"`
}

// ProviderModel describes one model a provider serves.
type ProviderModel struct {
	ID            string   `yaml:"id"`
	Name          string   `yaml:"name"`
	Reasoning     bool     `yaml:"reasoning"`
	Input         []string `yaml:"input"`
	ContextWindow int      `yaml:"context_window"`
	MaxTokens     int      `yaml:"max_tokens"`
	Cost          Cost     `yaml:"cost"`
}

// Cost is a price in USD per million tokens.
type Cost struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// CatalogEntry adds routing data to a model reference.
type CatalogEntry struct {
	// Alias is a short name usable anywhere a model reference is accepted.
	Alias string `yaml:"alias"`
	// Weight 0..100: higher is preferred (tried first).
	Weight int `yaml:"weight"`
	// Cost overrides the provider model's cost when set.
	Cost *Cost `yaml:"cost,omitempty"`
	// ContextWindow overrides the provider model's context window when > 0.
	ContextWindow int `yaml:"context_window"`
	// MaxOutputTokens caps each answer of the model (the request's
	// max_tokens); 0 takes the provider model's max_tokens, else 4096.
	MaxOutputTokens int `yaml:"max_output_tokens"`
	// Capabilities are what the model takes besides text: vision (images),
	// audio, tools. Left out, the model is taken to call tools only.
	Capabilities []string `yaml:"capabilities"`
}

// Model capabilities of models.catalog.<ref>.capabilities.
const (
	CapabilityVision = "vision"
	CapabilityAudio  = "audio"
	CapabilityTools  = "tools"
)

// Routing picks models.
type Routing struct {
	Primary   string   `yaml:"primary"`
	Fallbacks []string `yaml:"fallbacks"`
	// Pin maps a task type (code, chat, analysis, ...) to a model reference.
	Pin map[string]string `yaml:"pin"`
	// Allowed limits which models users may pick with /model; empty allows all.
	Allowed            []string `yaml:"allowed"`
	EscalateOnReaction bool     `yaml:"escalate_on_reaction"`
	MaxEscalations     int      `yaml:"max_escalations"`
	Affinity           Affinity `yaml:"affinity"`
	Budget             Budget   `yaml:"budget"`
	// CostWeight is λ in the utility the learned choice maximizes:
	// acceptance − λ × price relative to the most expensive model.
	CostWeight float64 `yaml:"cost_weight"`
	// Explore budgets the probes that re-check models the router has
	// settled against.
	Explore Explore `yaml:"explore"`
	// Judge is the optional LLM judge that grades a share of the answers
	// (off without a model).
	Judge Judge `yaml:"judge"`
}

// Judge is routing.judge: a small model grading a budgeted share of the
// answers as good or bad, a signal for quiet users.
type Judge struct {
	// Model is the judge's model reference ("" = no judge).
	Model string `yaml:"model"`
	// Rate is the share of chat answers graded (default 0.05; 0 grades
	// none, which turns the judge off).
	Rate float64 `yaml:"rate"`
	// DailyUSD caps the judge's cost per UTC day; 0 means no cap.
	DailyUSD float64 `yaml:"daily_usd"`
}

// Explore is the budget of re-exploration probes.
type Explore struct {
	// Rate is the largest share of a task type's learned choices that may
	// be probes; 0 turns probing off.
	Rate float64 `yaml:"rate"`
	// DailyUSD caps what probes cost per UTC day; 0 means no cap.
	DailyUSD float64 `yaml:"daily_usd"`
	// StaleAfter is how old a settled model's newest evidence gets before
	// it is probed again.
	StaleAfter Duration `yaml:"stale_after"`
}

// Affinity controls learning (task type, model) scores from quality signals.
type Affinity struct {
	Enabled   bool `yaml:"enabled"`
	DecayDays int  `yaml:"decay_days"`
	// Store is seed 004's JSON file of scores. It is taken so configs
	// written from the seed load, and ignored with a warning at start:
	// the scores live in the database (shared by replicas).
	Store string `yaml:"store,omitempty"`
}

// Budget caps spending per UTC day; 0 means no cap.
type Budget struct {
	DailyUSD     float64 `yaml:"daily_usd"`
	ChatDailyUSD float64 `yaml:"chat_daily_usd"`
}

// Auth configures credential profiles and their cooldowns.
type Auth struct {
	// ProfilesFile is a JSON file of auth profiles (mode 0600); "~" is
	// expanded, relative paths are resolved against the config directory.
	ProfilesFile string `yaml:"profiles_file"`
	// Order maps a provider id to its profile ids in preferred order.
	Order     map[string][]string `yaml:"order"`
	Cooldowns Cooldowns           `yaml:"cooldowns"`
}

// Cooldowns is the exponential backoff for a failing auth profile.
type Cooldowns struct {
	Initial         Duration `yaml:"initial"`
	Multiplier      float64  `yaml:"multiplier"`
	Max             Duration `yaml:"max"`
	BillingMaxHours int      `yaml:"billing_max_hours"`
}

// LLM bounds concurrent LLM calls across the process.
type LLM struct {
	MaxConcurrentLocal int `yaml:"max_concurrent_local"`
	MaxConcurrentCloud int `yaml:"max_concurrent_cloud"`
}

// Channels holds one block per chat platform.
type Channels struct {
	Console  Console  `yaml:"console"`
	Telegram Telegram `yaml:"telegram"`
	Slack    Slack    `yaml:"slack"`
	Discord  Discord  `yaml:"discord"`
}

// Channel names: the ConversationKey.Channel of each platform and the key
// of its block under channels.
const (
	ChannelConsole  = "console"
	ChannelTelegram = "telegram"
	ChannelSlack    = "slack"
	ChannelDiscord  = "discord"
)

// ChannelSection is one platform block as the rest of the program sees
// it: whether it is on, its models (every channel has them, the console
// too) and its common block (nil for the console).
type ChannelSection struct {
	Name    string
	Enabled bool
	// Model is channels.<x>.model; Models is channels.<x>.models (chat id
	// → model reference).
	Model  string
	Models map[string]string
	Common *ChannelCommon
}

// Sections lists every platform block, in a fixed order. It is the one
// list the config's model references, the router's per-channel models and
// the channel wiring derive from.
func (c *Channels) Sections() []ChannelSection {
	common := func(name string, enabled bool, cc *ChannelCommon) ChannelSection {
		return ChannelSection{Name: name, Enabled: enabled, Model: cc.Model, Models: cc.Models, Common: cc}
	}
	return []ChannelSection{
		{Name: ChannelConsole, Enabled: c.Console.Enabled, Model: c.Console.Model, Models: c.Console.Models},
		common(ChannelTelegram, c.Telegram.Enabled, &c.Telegram.ChannelCommon),
		common(ChannelSlack, c.Slack.Enabled, &c.Slack.ChannelCommon),
		common(ChannelDiscord, c.Discord.Enabled, &c.Discord.ChannelCommon),
	}
}

// Console is the stdin/stdout channel; on by default.
type Console struct {
	Enabled bool `yaml:"enabled"`
	// Streaming is accepted for symmetry with the other channels; the
	// console prints each answer once, whatever it says (default off).
	Streaming string `yaml:"streaming"`
	// Model is the console's model reference; empty uses routing.
	Model string `yaml:"model"`
	// Models maps a chat to a model reference, as on every channel; the
	// console's one chat is "local".
	Models map[string]string `yaml:"models"`
}

// Streaming values (channels.<x>.streaming).
const (
	StreamingOff    = "off"
	StreamingEdit   = "edit"
	StreamingNative = "native"
)

// Telegram mode values.
const (
	ModePolling = "polling"
	ModeWebhook = "webhook"
)

// Trigger values: when the bot answers in a group or channel (private
// chats are always answered).
const (
	// TriggerMention answers when addressed: a mention of the bot, a reply
	// to one of its messages, or a command.
	TriggerMention = "mention"
	// TriggerAll answers every message.
	TriggerAll = "all"
)

// ChannelCommon is the block every chat platform shares, inlined into its
// section (channels.telegram.allow_users, channels.slack.allow_users, ...).
// Its defaults are set per platform in Default.
type ChannelCommon struct {
	// AllowUsers are the user ids (or, where the platform has them,
	// @usernames, checked against usernames only) that may talk to the
	// bot; empty allows everyone.
	AllowUsers []string `yaml:"allow_users"`
	// AllowChats are the chat, channel or group ids the bot answers in;
	// empty allows every chat.
	AllowChats []string `yaml:"allow_chats"`
	// Trigger is TriggerMention or TriggerAll.
	Trigger string `yaml:"trigger"`
	// AckReaction is put on a message while it is being answered ("" = none).
	AckReaction string `yaml:"ack_reaction"`
	// Reactions are the emoji read as quality signals on the bot's answers.
	Reactions Reactions `yaml:"reactions"`
	// Model is this channel's default model reference; empty uses routing.
	Model string `yaml:"model"`
	// Models maps a chat id to a model reference.
	Models map[string]string `yaml:"models"`
	// Admins are the user ids that may use the admin-only commands
	// (/pair, ...) on this channel; they may always talk to the bot.
	Admins []string `yaml:"admins"`
	// Access is AccessOpen, AccessAllowlist or AccessPairing.
	Access string `yaml:"access"`
	// Streaming is StreamingOff, StreamingEdit (default) or
	// StreamingNative: how an answer is shown while it is written.
	Streaming string `yaml:"streaming"`
}

// Access values: who may talk to the bot on a channel (admins always may).
const (
	// AccessOpen lets everyone talk (within allow_users and allow_chats).
	AccessOpen = "open"
	// AccessAllowlist lets only allow_users and admins talk.
	AccessAllowlist = "allowlist"
	// AccessPairing gives an unknown user a short code and answers them
	// once an admin approved it (allow_users are approved from the start).
	AccessPairing = "pairing"
)

// PlatformUsers is the user allowlist a platform adapter applies itself,
// before the gateway decides access: in pairing mode nobody is filtered
// out (an unknown user must reach the gateway to get a code); otherwise
// allow_users plus the admins, where allow_users is set or the mode is
// allowlist. nil filters nobody out (validation refuses an allowlist with
// nobody on it).
func (c ChannelCommon) PlatformUsers() []string {
	if c.Access == AccessPairing || c.Access != AccessAllowlist && len(c.AllowUsers) == 0 {
		return nil
	}
	return append(slices.Clone(c.AllowUsers), c.Admins...)
}

// Telegram configures the Telegram bot channel.
type Telegram struct {
	Enabled bool   `yaml:"enabled"`
	Token   Secret `yaml:"token"`
	// APIURL is the Bot API base URL (tests and self-hosted servers).
	APIURL  string          `yaml:"api_url"`
	Mode    string          `yaml:"mode"`
	Webhook TelegramWebhook `yaml:"webhook"`
	// GroupTrigger is the older name of trigger; when set it wins.
	GroupTrigger string `yaml:"group_trigger"`
	// MessagesPerSecond bounds what the bot sends per second across all
	// its chats (0: 30, Telegram's limit for a bot; raise it only with
	// paid broadcasts, or for a Bot API server of your own that allows
	// more).
	MessagesPerSecond int `yaml:"messages_per_second"`
	ChannelCommon     `yaml:",inline"`
}

// TelegramWebhook is used when Telegram.Mode is ModeWebhook.
type TelegramWebhook struct {
	// Listen is the local address the webhook server binds.
	Listen string `yaml:"listen"`
	// URL is the public URL Telegram posts to.
	URL    string `yaml:"url"`
	Secret Secret `yaml:"secret"`
}

// Reactions lists the emoji read as quality signals.
type Reactions struct {
	Positive []string `yaml:"positive"`
	Negative []string `yaml:"negative"`
}

// Slack configures the Slack channel.
type Slack struct {
	Enabled bool `yaml:"enabled"`
	// Mode is SlackModeSocket (Socket Mode, the default) or SlackModeEvents
	// (the Events API over HTTP).
	Mode string `yaml:"mode"`
	// BotToken is the bot's xoxb- token (every Web API call).
	BotToken Secret `yaml:"bot_token"`
	// AppToken is the app-level xapp- token Socket Mode connects with.
	AppToken Secret `yaml:"app_token"`
	// SigningSecret verifies the Events API's requests (events mode).
	SigningSecret Secret      `yaml:"signing_secret"`
	Events        SlackEvents `yaml:"events"`
	// APIURL is the Web API base URL (tests point it elsewhere).
	APIURL string `yaml:"api_url"`
	// ReplyInThread is ReplyInThreadAuto, ReplyInThreadAlways or
	// ReplyInThreadNever.
	ReplyInThread string `yaml:"reply_in_thread"`
	ChannelCommon `yaml:",inline"`
}

// Slack mode values.
const (
	SlackModeSocket = "socket"
	SlackModeEvents = "events"
)

// Slack reply_in_thread values.
const (
	// ReplyInThreadAuto replies in the thread the user wrote in, starts a
	// thread under a channel mention, and replies plainly in a DM.
	ReplyInThreadAuto = "auto"
	// ReplyInThreadAlways puts every reply in a thread, in DMs too.
	ReplyInThreadAlways = "always"
	// ReplyInThreadNever never replies in a thread.
	ReplyInThreadNever = "never"
)

// SlackEvents is the HTTP endpoint of the Events API (events mode).
type SlackEvents struct {
	// Listen is the local address the events server binds.
	Listen string `yaml:"listen"`
	// Path is the request path Slack posts events and slash commands to.
	Path string `yaml:"path"`
}

// Discord configures the Discord bot channel.
type Discord struct {
	Enabled bool   `yaml:"enabled"`
	Token   Secret `yaml:"token"`
	// APIURL replaces https://discord.com for REST and gateway discovery;
	// request paths stay as the library sends them (/api/v9/...). A
	// discovery answer naming Discord's own gateway means this host too.
	// An older value ending in /api or /api/v<N> means the same host.
	APIURL string `yaml:"api_url"`
	// AllowGuilds are the guild (server) ids the bot answers in; empty
	// allows every guild. Direct messages are in no guild: allow_users and
	// allow_chats govern them.
	AllowGuilds []string `yaml:"allow_guilds"`
	// RegisterCommands registers the in-chat commands as application
	// commands at start: globally, or in each of allow_guilds when set.
	RegisterCommands bool `yaml:"register_commands"`
	// Shards is the number of gateway shards: a whole number (default 1)
	// or "auto", the count GET /gateway/bot recommends. On PostgreSQL each
	// shard is a lease the replicas share out; on SQLite the one process
	// runs every shard.
	Shards        DiscordShards `yaml:"shards"`
	ChannelCommon `yaml:",inline"`
}

// Plugins holds both plugin tiers.
type Plugins struct {
	Tools Tools `yaml:"tools"`
	Lua   Lua   `yaml:"lua"`
	// Auth and Blobs name the plugins serving as auth provider and blob
	// storage (see extensions.go).
	Auth  PluginAuth  `yaml:"auth"`
	Blobs PluginBlobs `yaml:"blobs"`
}

// Tools configures tier-1 gRPC plugins.
type Tools struct {
	// PluginDir is scanned for plugin binaries; "~" expanded, relative to
	// the config directory.
	PluginDir string `yaml:"plugin_dir"`
	// Plugins are explicit plugin binary paths (same path rules).
	Plugins             []string                `yaml:"plugins"`
	HealthCheckInterval Duration                `yaml:"health_check_interval"`
	RestartOnFailure    bool                    `yaml:"restart_on_failure"`
	MaxRestarts         int                     `yaml:"max_restarts"`
	Defaults            PluginLimits            `yaml:"defaults"`
	Overrides           map[string]PluginLimits `yaml:"overrides"`
	Sanitize            Sanitize                `yaml:"sanitize"`
	// RunAs is the user plugins run as when the core runs as root: a
	// name or uid; "" = opentalon-plugin if that user exists, else nobody.
	RunAs string `yaml:"run_as"`
	// MaxCallsPerTurn bounds the tool calls run for one LLM answer.
	MaxCallsPerTurn int                 `yaml:"max_calls_per_turn"`
	State           PluginStateLimits   `yaml:"state"`
	Sandbox         PluginSandbox       `yaml:"sandbox"`
	ProcessLimits   PluginProcessLimits `yaml:"process_limits"`
	// Hooks and HTTP bound the plugins' hooks and HTTP routes.
	Hooks PluginHooks `yaml:"hooks"`
	HTTP  PluginHTTP  `yaml:"http"`
}

// PluginStateLimits bound each plugin's key-value state.
type PluginStateLimits struct {
	MaxKeys  int   `yaml:"max_keys"`
	MaxBytes int64 `yaml:"max_bytes"` // keys and values together
	// WritesPerSecond bounds Set and Delete calls (bursts of twice as many).
	WritesPerSecond float64 `yaml:"writes_per_second"`
}

// PluginSandbox configures Landlock confinement of plugin processes.
type PluginSandbox struct {
	Landlock bool `yaml:"landlock"`
	// ReadPaths and WritePaths are extra paths a confined plugin may read
	// (and execute), or read and write; "~" expanded, relative to the
	// config directory.
	ReadPaths  []string `yaml:"read_paths"`
	WritePaths []string `yaml:"write_paths"`
}

// PluginProcessLimits are the resource limits of each plugin process;
// 0 = not limited.
type PluginProcessLimits struct {
	AddressSpaceMB int `yaml:"address_space_mb"`
	OpenFiles      int `yaml:"open_files"`
	Processes      int `yaml:"processes"`
}

// LimitsFor returns the limits of plugin name: its override where set,
// else the defaults.
func (t Tools) LimitsFor(name string) PluginLimits {
	l := t.Defaults
	if o, ok := t.Overrides[name]; ok {
		if o.Timeout > 0 {
			l.Timeout = o.Timeout
		}
		if o.MaxResponseBytes > 0 {
			l.MaxResponseBytes = o.MaxResponseBytes
		}
	}
	return l
}

// PluginLimits bound one plugin call. A zero field in an override inherits
// the default.
type PluginLimits struct {
	Timeout          Duration `yaml:"timeout"`
	MaxResponseBytes int      `yaml:"max_response_bytes"`
}

// Sanitize adds patterns to the guard's sanitizer.
type Sanitize struct {
	// ExtraPatterns are Go regular expressions removed from plugin output.
	ExtraPatterns []string `yaml:"extra_patterns"`
}

// Lua configures tier-2 Lua hooks.
type Lua struct {
	// ScriptsDir holds *.lua hooks; "~" expanded, relative to the config
	// directory. Empty disables Lua.
	ScriptsDir string `yaml:"scripts_dir"`
	// Watch reloads scripts when they change.
	Watch bool `yaml:"watch"`
	// DefaultModel is used by ctx.llm when the script names no model.
	DefaultModel string `yaml:"default_model"`
	// DropNotice, when set, is sent to a user whose message a filter
	// dropped; empty sends nothing.
	DropNotice string    `yaml:"drop_notice"`
	Limits     LuaLimits `yaml:"limits"`
}

// LuaLimits bound one script run.
type LuaLimits struct {
	MemoryMB          int `yaml:"memory_mb"`
	TimeoutSeconds    int `yaml:"timeout_seconds"`
	LLMTimeoutSeconds int `yaml:"llm_timeout_seconds"`
	LLMMaxCalls       int `yaml:"llm_max_calls"`
	// KVMaxKeys and KVMaxBytes bound each script's ctx.kv_set namespace
	// (keys and values in bytes); 0 = no bound.
	KVMaxKeys  int   `yaml:"kv_max_keys"`
	KVMaxBytes int64 `yaml:"kv_max_bytes"`
}

// Orchestrator configures the agent loop.
type Orchestrator struct {
	// Rules are custom system-prompt rules added after the built-in ones.
	Rules    []string `yaml:"rules"`
	MaxSteps int      `yaml:"max_steps"`
	// Steps are named orchestration steps that narrow the tools offered.
	Steps []Step `yaml:"steps"`
}

// Step is one orchestration step: while it is a conversation's active
// step, the LLM is offered only its tools.
type Step struct {
	Name string `yaml:"name"`
	// When is a regular expression (case-insensitive) that activates the
	// step when a user message matches it.
	When string `yaml:"when"`
	// Tools are "plugin.action" names (or a built-in tool such as
	// memory_search).
	Tools []string `yaml:"tools"`
	// Sequence offers the tools one at a time in order, moving on as each
	// call succeeds; the step ends after the last.
	Sequence bool `yaml:"sequence"`
}

// Server is the local HTTP server (health, metrics, plugin LLM API).
type Server struct {
	// Listen address; empty turns the server off.
	Listen string `yaml:"listen"`
	APIKey Secret `yaml:"api_key"`
	// Metrics serves GET /metrics and counts what the gateway does; false
	// leaves the counting out of the message path.
	Metrics bool `yaml:"metrics"`
}
