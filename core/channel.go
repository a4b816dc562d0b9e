package core

import (
	"context"
	"time"
)

// Channel is a chat platform adapter. Lifecycle: construct without side
// effects, then Run, which connects and blocks until ctx is done (the
// gateway may run it again after it failed), then Close.
type Channel interface {
	// Name is the channel's id ("telegram"); it is ConversationKey.Channel
	// of everything the channel hands to the Sink.
	Name() string
	// Run connects to the platform and hands every event to sink until ctx
	// is cancelled. An event must be acknowledged to the platform only
	// after sink accepted it (the sink returns once the event is
	// committed). Run returns nil when ctx ends, an error when it cannot
	// go on: one of kind KindAuth when the platform refuses the credential
	// or KindInvalid when the config cannot work (the gateway then stops,
	// naming the config key in the message), any other error when the
	// connection failed (the gateway restarts the channel with backoff).
	Run(ctx context.Context, sink Sink) error
	// Format turns a reply (Markdown as the LLM writes it) into the parts
	// the platform will accept, each within its size limit.
	Format(text string) []string
	// Send sends one part and returns the platform's id of the sent
	// message. It may be called concurrently for different conversations,
	// never for the same conversation.
	Send(ctx context.Context, to Outbound, part string) (string, error)
	// Close releases what the channel holds (connections, listeners)
	// after Run returned for good. It may be called more than once.
	Close() error
}

// Sink is what a channel hands events to: the Gateway.
type Sink interface {
	// Accept commits a message to the queue and returns; a nil error means
	// the message is durable and the platform may be acknowledged. A
	// message already accepted (same channel and MessageID) is a no-op.
	Accept(ctx context.Context, in Inbound) error
	// Edit replaces the text of a message that is still queued; an edit
	// of a message already processed is ignored. It reports whether the
	// queued text was replaced.
	Edit(ctx context.Context, in Inbound) (bool, error)
	// React commits a reaction to the queue (deduplicated by EventID).
	React(ctx context.Context, r Reaction) error
	// Commands lists the in-chat commands core answers, for platforms that
	// advertise them (Telegram's setMyCommands, Slack's slash commands).
	Commands() []CommandInfo
}

// Indicator is an optional Channel capability: show that the bot is
// working on a message (typing indicator, an "eyes" reaction). The
// returned stop function is called once the reply is sent or failed.
type Indicator interface {
	Working(ctx context.Context, in Inbound) (stop func())
}

// HealthReporter is an optional Channel capability: readiness for
// /readyz and a line for /status.
type HealthReporter interface {
	// Healthy returns nil while the channel is connected.
	Healthy() error
	// LastEvent is when the platform last delivered anything.
	LastEvent() time.Time
}

// CredentialChecker is an optional Channel capability for `opentalon
// doctor`: one harmless call that tells whether the platform accepts the
// channel's credential. It may be called without Run.
type CredentialChecker interface {
	// CheckCredential returns the account the credential belongs to (the
	// bot's name), or an error naming the config key to fix.
	CheckCredential(ctx context.Context) (string, error)
}
