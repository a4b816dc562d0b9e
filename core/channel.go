package core

import (
	"context"
	"fmt"
	"io"
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
	// committed). Run returns nil when ctx ends (but a refusal of kind
	// KindAuth or KindInvalid it got meanwhile all the same), an error when it cannot
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

// CommandKnower is an optional capability of a Sink (the Gateway):
// whether core answers a command of that name (hidden ones too). Where a
// bare "/name" may be meant for another bot (a Telegram group, where
// Telegram hands every bot the commands typed there), a channel asks it
// before taking the command as addressed to the bot.
type CommandKnower interface {
	KnowsCommand(name string) bool
}

// AccessChecker is an optional capability of a Sink (the Gateway): it
// says whether the sender of in may talk to the bot on its channel, by
// the rules Accept applies, with no side effect (no pairing code is
// given). A channel asks it about what it brings to the LLM besides the
// message itself (the earlier messages of a Slack thread), so nothing of
// a user who may not talk reaches the LLM that way either.
type AccessChecker interface {
	MayTalk(ctx context.Context, in Inbound) bool
}

// ReplyLedger is an optional capability of a Sink (the Gateway): whether
// the bot has answered in a conversation, read from the database (so it
// holds for every replica sharing it, whichever one answered). A channel
// asks it whether a thread's follow-up is for the bot.
type ReplyLedger interface {
	Replied(ctx context.Context, conv ConversationKey) (bool, error)
}

// ThreadLedger is an optional capability of a Sink (the Gateway): the
// thread of a chat in which the bot last answered a user, read from the
// database (whichever replica answered). A channel asks it where a
// command given in the chat but meant for a thread belongs: a Slack
// slash command carries its channel, never its thread.
type ThreadLedger interface {
	// LatestThread returns the thread of conv's chat (conv.Thread is
	// ignored) in which the bot last answered userID; "" when there is
	// none.
	LatestThread(ctx context.Context, conv ConversationKey, userID string) (string, error)
}

// CredentialKeeper is an optional capability of a Sink (the Gateway): it
// keeps a short-lived platform credential needed to answer later (a
// Discord interaction's token, a Slack response_url) sealed in the
// database until it expires, so whichever replica runs the request can
// answer in place. The channel drops it once the answer is sent.
type CredentialKeeper interface {
	// KeepCredential stores secret under name until expires; an error
	// means it could not (no seal key, the database refused): the channel
	// keeps it in memory only.
	KeepCredential(ctx context.Context, name, secret string, expires time.Time) error
	// Credential returns what is kept under name, if it is still valid.
	Credential(ctx context.Context, name string) (string, bool)
	// DropCredential deletes what is kept under name.
	DropCredential(ctx context.Context, name string)
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

// ConnectionReporter is an optional Channel capability: when the channel
// last said it is connected to its platform (zero while it fails or
// connects). A channel restarted after a failure that connected again is
// ready at once, not after the restart's settling time.
type ConnectionReporter interface {
	ConnectedAt() time.Time
}

// Uncapped is an optional Channel capability: a channel whose one user is
// the operator at this machine (the console), whose lines, piped from a
// file or typed, are all queued: queue.max_pending, which keeps a public
// chat from flooding the queue, does not refuse them.
type Uncapped interface {
	Uncapped() bool
}

// CredentialChecker is an optional Channel capability for `opentalon
// doctor`: harmless calls (one per token) that tell whether the platform
// accepts the channel's credentials. It may be called without Run.
type CredentialChecker interface {
	// CheckCredential returns the account the credential belongs to (the
	// bot's name), or an error naming the config key to fix.
	CheckCredential(ctx context.Context) (string, error)
}

// StreamMode is how a channel shows an answer while it is written
// (channels.<x>.streaming).
type StreamMode string

// Stream modes.
const (
	// StreamOff sends the answer once it is complete.
	StreamOff StreamMode = "off"
	// StreamEdit sends the first chunk as a message and edits it as the
	// text grows.
	StreamEdit StreamMode = "edit"
	// StreamNative uses the platform's own streaming API (Telegram's
	// drafts, Slack's streaming messages), falling back to edit.
	StreamNative StreamMode = "native"
)

// StreamPolicy is how answers to one conversation are streamed.
type StreamPolicy struct {
	Mode StreamMode
	// FirstDelay is how long the first text waits before it is shown, so
	// a quick answer still arrives as one message.
	FirstDelay time.Duration
	// Interval is the least time between two updates of a message (the
	// channel's own pacing still applies to each call).
	Interval time.Duration
}

// DraftPart is one message of an answer being written: the Markdown it
// holds so far and that text formatted for display (unclosed code fences
// and entities closed).
type DraftPart struct {
	Raw  string
	Part string
}

// Streamer is an optional Channel capability: answers are shown while
// they are written, by editing a message (StreamEdit).
type Streamer interface {
	// Streaming says how an answer to the conversation of to is streamed;
	// Mode StreamOff means not at all.
	Streaming(to Outbound) StreamPolicy
	// Draft splits an answer being written into the messages it fills,
	// each within the platform's size limit. Cutting the text longer only
	// adds to the last part or adds parts.
	Draft(text string) []DraftPart
	// Edit replaces the text of a message the bot sent (id as Send
	// returned it) with part.
	Edit(ctx context.Context, to Outbound, id, part string) error
}

// ErrNoNativeStream is what a NativeStreamer returns when the platform
// refuses its own streaming for a conversation; the stream then edits.
var ErrNoNativeStream = &Error{Kind: KindBadRequest, Msg: "the platform does not stream natively here"}

// NativeStreamer is an optional Channel capability: the platform's own
// streaming API (StreamNative).
type NativeStreamer interface {
	// ShowDraft shows message d natively: d.Raw has grown from d.Shown,
	// the Markdown shown before (empty on the first call, when d.ID is ""
	// too). It returns the id of the message, "" while the draft is none
	// (Telegram's drafts are not messages until they end).
	ShowDraft(ctx context.Context, to Outbound, d NativeDraft) (string, error)
	// EndDraft ends message d: it shows part and is an ordinary message
	// from then on, whose id is returned.
	EndDraft(ctx context.Context, to Outbound, d NativeDraft, part string) (string, error)
}

// NativeDraft is one message of a natively streamed answer.
type NativeDraft struct {
	// Seq tells the answer's messages apart (0, 1, …); Key is the same for
	// every message of one answer.
	Seq int
	Key int64
	// ID is the message's id so far ("" = none yet).
	ID string
	// Shown is the Markdown shown before this call; Raw and Part the
	// Markdown now and its display form.
	Shown, Raw, Part string
}

// Deleter is an optional Channel capability: remove a message the bot
// sent (a streamed message the final text does not need).
type Deleter interface {
	Delete(ctx context.Context, to Outbound, id string) error
}

// Uploader is an optional Channel capability: send a file.
type Uploader interface {
	// MaxUpload is the largest file the platform takes from the bot, in
	// bytes, for f's kind.
	MaxUpload(f Attachment) int64
	// Upload sends f (Data set) to the conversation of to and returns the
	// platform id of the message that carries it.
	Upload(ctx context.Context, to Outbound, f Attachment) (string, error)
}

// Fetcher is an optional Channel capability: download a file a message
// carries, from the platform's own file host only.
type Fetcher interface {
	// Fetch writes the content of f to w. More than limit bytes is an
	// error (ErrTooLarge), and the download stops there.
	Fetch(ctx context.Context, f InboundFile, w io.Writer, limit int64) error
}

// ErrTooLarge is the error of a download past its size limit.
var ErrTooLarge = &Error{Kind: KindInvalid, Msg: "the file is larger than media.max_bytes"}

// PlatformLimit is a download the platform itself refuses for its size,
// whatever media.max_bytes allows (Telegram's Bot API serves bots files
// of at most 20 MB). errors.Is takes it for ErrTooLarge.
type PlatformLimit struct {
	// Platform is its name as users know it ("Telegram").
	Platform string
	// Max is the largest file it lets a bot download, in bytes.
	Max int64
}

func (e *PlatformLimit) Error() string {
	return fmt.Sprintf("the file is larger than %s lets a bot download (%d bytes)", e.Platform, e.Max)
}

// Is makes a PlatformLimit an ErrTooLarge.
func (e *PlatformLimit) Is(target error) bool { return target == ErrTooLarge }

// DownloadError is a file of a message that could not be downloaded
// from its platform. Its kind (ErrorKind) is its cause's, so it is
// retried as that is; the user hears that the file could not be
// downloaded, not that the AI provider failed.
type DownloadError struct {
	// Name is the file's name ("" = not known); Platform the channel's.
	Name, Platform string
	Err            error
}

func (e *DownloadError) Error() string {
	return fmt.Sprintf("download %s from %s: %v", e.what(), e.Platform, e.Err)
}

func (e *DownloadError) Unwrap() error { return e.Err }

func (e *DownloadError) what() string {
	if e.Name == "" {
		return "the file"
	}
	return e.Name
}
