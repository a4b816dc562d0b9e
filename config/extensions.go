package config

// Schedule is one scheduled task (schedules:): when it fires, what it
// does and where its output goes.
type Schedule struct {
	// Interval (a Go duration such as "2s" or "24h") or Cron (five
	// fields, "0 9 * * 1-5"): one of the two.
	Interval Duration `yaml:"interval"`
	Cron     string   `yaml:"cron"`
	// Prompt is answered by the LLM; or Plugin's Action runs with Args
	// and its output is posted.
	Prompt string            `yaml:"prompt"`
	Plugin string            `yaml:"plugin"`
	Action string            `yaml:"action"`
	Args   map[string]string `yaml:"args"`
	// Channel, Chat and Thread are the conversation the output goes to.
	Channel string `yaml:"channel"`
	Chat    string `yaml:"chat"`
	Thread  string `yaml:"thread"`
	// Model forces a model reference for the prompt ("" = routing).
	Model string `yaml:"model"`
	// Timezone is an IANA zone for Cron ("" = the config's timezone).
	Timezone string `yaml:"timezone"`
	// Missed is MissedSkip (default) or MissedOnce: what a firing that
	// fell while the gateway was down becomes.
	Missed string `yaml:"missed"`
}

// Missed-firing policies of a schedule.
const (
	MissedSkip = "skip"
	MissedOnce = "once"
)

// Notifications configures where operator events go.
type Notifications struct {
	// Window is how long an event of one kind and subject is not sent
	// again; MaxPerWindow bounds the events of one kind per Window.
	Window       Duration `yaml:"window"`
	MaxPerWindow int      `yaml:"max_per_window"`
	// ChannelDownAfter is how long a channel may be down before it is
	// reported.
	ChannelDownAfter Duration `yaml:"channel_down_after"`
	Sinks            []Sink   `yaml:"sinks"`
}

// Sink types.
const (
	SinkWebhook = "webhook"
	SinkChat    = "chat"
	SinkPlugin  = "plugin"
)

// Sink is one destination of operator events.
type Sink struct {
	// Type is SinkWebhook, SinkChat or SinkPlugin.
	Type string `yaml:"type"`
	// URL and Secret: a webhook's endpoint and HMAC-SHA256 key. The URL
	// is printed as its scheme and host only: Slack's and Discord's
	// incoming webhooks carry their token in the path.
	URL    CredentialURL `yaml:"url"`
	Secret Secret        `yaml:"secret"`
	// Channel, Chat and Thread: a chat sink's conversation.
	Channel string `yaml:"channel"`
	Chat    string `yaml:"chat"`
	Thread  string `yaml:"thread"`
	// Plugin: a plugin sink's plugin (it serves Notify).
	Plugin string `yaml:"plugin"`
	// Events are the event kinds it gets; empty = every kind.
	Events []string `yaml:"events"`
}

// PluginHooks bounds gRPC hook calls.
type PluginHooks struct {
	// Timeout bounds one hook call; a hook that takes longer is skipped.
	Timeout Duration `yaml:"timeout"`
}

// PluginHTTP bounds the plugins' HTTP routes.
type PluginHTTP struct {
	MaxBodyBytes int64    `yaml:"max_body_bytes"`
	Timeout      Duration `yaml:"timeout"`
}

// PluginAuth names the auth provider plugin.
type PluginAuth struct {
	// Plugin serves Authorize; "" = no auth provider.
	Plugin string `yaml:"plugin"`
	// CacheTTL is how long an answer is kept; Timeout bounds one call.
	CacheTTL Duration `yaml:"cache_ttl"`
	Timeout  Duration `yaml:"timeout"`
	// Channels it applies to; empty = every chat platform.
	Channels []string `yaml:"channels"`
}

// PluginBlobs names the blob storage plugin.
type PluginBlobs struct {
	// Plugin serves Put, Get and Delete; "" = files under
	// <data_dir>/blobs.
	Plugin string `yaml:"plugin"`
}
