package core

import (
	"strings"
	"time"
)

// ConversationKey identifies one conversation: a platform, a chat on that
// platform and, where the platform has them, a thread or topic in the chat.
// Requests of one conversation are processed strictly one after another.
type ConversationKey struct {
	Channel string // "console", "telegram", "slack", "discord"
	Chat    string // platform chat / channel / DM id
	Thread  string // thread, forum topic or "" for none
}

// String renders the key as "channel:chat[:thread]"; it is the form stored
// in the database and used as the session key.
func (k ConversationKey) String() string {
	if k.Thread == "" {
		return k.Channel + ":" + k.Chat
	}
	return k.Channel + ":" + k.Chat + ":" + k.Thread
}

// ParseConversationKey is the inverse of ConversationKey.String.
func ParseConversationKey(s string) ConversationKey {
	parts := strings.SplitN(s, ":", 3)
	var k ConversationKey
	switch len(parts) {
	case 3:
		k.Thread = parts[2]
		fallthrough
	case 2:
		k.Chat = parts[1]
		fallthrough
	case 1:
		k.Channel = parts[0]
	}
	return k
}

// Inbound is one normalized message from a platform.
type Inbound struct {
	Conversation ConversationKey
	// MessageID is the platform's id of this message; together with the
	// channel it is the dedupe key of the queue.
	MessageID string
	UserID    string
	UserName  string
	Text      string
	// Context is what the channel quotes for the LLM before Text: the
	// message this one replies to, or the part of one it quotes. It is
	// not the user's own words: commands, /stop and the judging of a
	// follow-up ("that's wrong") read Text alone. Prompt joins the two.
	Context string `json:",omitempty"`
	// Mentioned says the bot was addressed (mention, reply to the bot, DM).
	Mentioned bool
	// Private says the conversation is a one-to-one chat with the bot.
	Private bool
	// Ephemeral says the platform shows the answer to this message only to
	// its sender, in a conversation others read: a slash command answered
	// ephemerally (Slack, Discord).
	Ephemeral bool `json:",omitempty"`
	// Awaited says the platform shows the sender a pending state until
	// the bot answers this message (a Discord application command's
	// deferred "thinking…"): one the bot refuses is answered, not
	// ignored.
	Awaited bool `json:",omitempty"`
	// ReplyTo is the platform id of the message this one answers, if any.
	ReplyTo string
	// Meta carries platform details the adapter needs to answer later
	// (it is stored with the request and handed back in Outbound).
	Meta map[string]string `json:",omitempty"`
	// Files are the files the message carries (photos, documents, voice
	// notes), as the platform names them; nothing is downloaded yet.
	Files      []InboundFile `json:",omitempty"`
	ReceivedAt time.Time
	// Origin is "" for a message a platform delivered, else who put it
	// into the conversation: OriginSchedule or OriginPlugin+"<name>".
	// Such a message is never a reply to a platform message and its
	// sender is never an admin.
	Origin string `json:",omitempty"`
}

// MediaKind says what a file is to the gateway.
type MediaKind string

// Media kinds.
const (
	MediaImage    MediaKind = "image"
	MediaAudio    MediaKind = "audio"
	MediaDocument MediaKind = "document"
)

// KindOfMIME is the media kind of a MIME type: image/*, audio/* (and
// Ogg voice notes), else a document.
func KindOfMIME(mime string) MediaKind {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return MediaImage
	case strings.HasPrefix(mime, "audio/"), mime == "application/ogg", mime == "video/ogg":
		return MediaAudio
	}
	return MediaDocument
}

// InboundFile is a file a message carries, as its platform names it. The
// channel's Fetch downloads it.
type InboundFile struct {
	// ID is what the channel downloads the file by (Telegram's file_id, a
	// Slack or Discord file URL); with the channel's name it keys the
	// media cache, so a retried message is not downloaded again.
	ID   string
	Kind MediaKind
	Name string `json:",omitempty"`
	MIME string `json:",omitempty"`
	// Size is the size the platform declares (0 = not said).
	Size int64 `json:",omitempty"`
}

// Attachment is a file kept in the media store (<data_dir>/media) by
// the SHA-256 of its content: an image a user sent, a file a tool made.
type Attachment struct {
	Kind MediaKind `json:"kind"`
	Name string    `json:"name,omitempty"`
	MIME string    `json:"mime"`
	Size int64     `json:"size"`
	// SHA256 is the hex digest of the content: its name in the store.
	SHA256 string `json:"sha256,omitempty"`
	// Data is the content while it is used (an LLM call, an upload); it is
	// never stored in the database.
	Data []byte `json:"-"`
}

// Polarity is the judgement a signal carries.
type Polarity int

// Polarities.
const (
	Neutral  Polarity = 0
	Positive Polarity = 1
	Negative Polarity = -1
)

func (p Polarity) String() string {
	switch p {
	case Positive:
		return "positive"
	case Negative:
		return "negative"
	}
	return "neutral"
}

// Reaction is an emoji added to or removed from a message. Channels map the
// emoji to a Polarity (their mapping is configurable); core only acts on
// reactions to messages the bot sent.
type Reaction struct {
	Conversation ConversationKey
	// EventID dedupes the reaction in the queue (platform update id or a
	// hash of message, user, emoji and direction).
	EventID string
	// MessageID is the platform id of the message reacted to.
	MessageID string
	UserID    string
	Emoji     string
	Added     bool
	Polarity  Polarity
	At        time.Time
}

// Outbound tells a channel where a reply part goes.
type Outbound struct {
	Conversation ConversationKey
	// ReplyTo is the platform id of the user's message being answered.
	ReplyTo string
	Meta    map[string]string
	// Part is the index of this part in the reply (0-based) and Parts
	// their number, so an adapter can, say, quote only on the first part.
	Part, Parts int
	// Notice marks a courtesy of the gateway's own that no one waits for
	// (a message was not taken): a channel that paces its sends lets the
	// answers waiting in the conversation go before it.
	Notice bool
}

// Prompt is the message as the LLM is given it: Context, then Text.
func (in Inbound) Prompt() string { return in.Context + in.Text }

// Role is a chat message's author.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ChatMessage is one entry of a conversation's history as the LLM sees it.
type ChatMessage struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Attachments are the images a user message shows the model; the
	// history keeps their references, the bytes stay in the media store.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Name is the speaker of a user message in a group conversation (the
	// channel's display name, cleaned by core.SpeakerName); "" in a
	// private chat and for every other role. Providers never send it:
	// the orchestrator attributes earlier group turns by it when it
	// builds the prompt.
	Name string `json:"name,omitempty"`
}

// ToolCall is the LLM's request to run one plugin action.
type ToolCall struct {
	ID     string            `json:"id"`
	Plugin string            `json:"plugin"`
	Action string            `json:"action"`
	Args   map[string]string `json:"args,omitempty"`
}

// ToolResult is a plugin's answer to one ToolCall.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Content string `json:"content"`
	Error   string `json:"error,omitempty"`
	// Files are the files the call made (a chart, a report); they are
	// sent with the answer.
	Files []Attachment `json:"-"`
}

// ToolParam describes one argument of a tool.
type ToolParam struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Type        string `json:"type,omitempty"` // "string" when empty
	Required    bool   `json:"required,omitempty"`
}

// ToolSpec is one plugin action offered to the LLM as a tool.
type ToolSpec struct {
	Plugin      string      `json:"plugin"`
	Action      string      `json:"action"`
	Description string      `json:"description,omitempty"`
	Params      []ToolParam `json:"params,omitempty"`
}

// Usage counts the tokens of one or more LLM calls.
type Usage struct {
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CostUSD += u2.CostUSD
}

// Session is the state of one conversation: a fresh one starts with /new.
type Session struct {
	ID           int64
	Conversation ConversationKey
	// ModelPin and ProfilePin are the user's /model choices ("" = auto).
	ModelPin   string
	ProfilePin string
	Usage      Usage
	CreatedAt  time.Time
	LastAccess time.Time
	// State is the session's orchestration state, persisted with it.
	State SessionState
	// Idle is set only on a session just started because the
	// conversation's previous one had been idle past state.session_ttl:
	// how long it had been idle (the answer tells the user). Not stored.
	Idle time.Duration
}

// SessionState is what the orchestrator keeps per session besides the
// history: the tools used recently (newest first), the model and auth
// profile of the latest answer, the active orchestration step with the
// position in its tool sequence, and how often the history was compacted.
type SessionState struct {
	RecentTools   []string `json:"recent_tools,omitempty"`
	ActiveModel   string   `json:"active_model,omitempty"`
	ActiveProfile string   `json:"active_profile,omitempty"`
	Step          string   `json:"step,omitempty"`
	StepIndex     int      `json:"step_index,omitempty"`
	Compactions   int      `json:"compactions,omitempty"`
	// TrimNoted says the user was told that older messages were left
	// out without a summary (told once a session).
	TrimNoted bool `json:"trim_noted,omitempty"`
}

// Reply is an answer the gateway stored for a request, and its parts as
// formatted for the channel.
type Reply struct {
	ID           int64
	RequestID    int64
	SessionID    int64
	Conversation ConversationKey
	Text         string
	Parts        []string
	// Sent holds the platform message id of each part sent so far ("" =
	// not yet sent). It may be longer than Parts: the messages a stream
	// opened that the final text no longer needs.
	Sent []string
	// Draft says, for each entry of Sent, that the message shows streamed
	// text and still has to be edited to its final part.
	Draft []bool
	// Streaming says the reply is being streamed: its text is not known
	// yet, only the messages the stream opened (Sent, all Draft).
	Streaming bool
	// Files are sent after the parts; file i is delivery part
	// len(Parts)+i.
	Files    []Attachment
	Model    string
	TaskType string
	// Reason says why the model was chosen (for /status and /model).
	Reason string
	Usage  Usage
	// Metadata is what the pre-hooks attached to the request.
	Metadata  map[string]string
	CreatedAt time.Time
}

// SignalKind says where a quality signal came from.
type SignalKind string

// Signal kinds.
const (
	SignalReaction SignalKind = "reaction"
	SignalRetry    SignalKind = "retry"
	SignalFollowUp SignalKind = "followup"
	SignalRephrase SignalKind = "rephrase"
	SignalExplicit SignalKind = "explicit_model"
	// SignalAbandoned: nothing followed the answer for a while (the
	// router's sweep records it). Not a verdict: a later follow-up still
	// judges the answer.
	SignalAbandoned SignalKind = "abandoned"
)

// Signal is one judgement on a reply (and so on its model and task type).
type Signal struct {
	Kind     SignalKind
	Polarity Polarity
	ReplyID  int64
	Model    string
	TaskType string
	UserID   string
	Weight   float64 // 1 for ordinary signals; explicit choices weigh more; below 0 a judgement taken back (a reaction removed)
	At       time.Time
	// RequestID is the queue item whose handling produced the signal (0 =
	// none); a retried item records its signal once.
	RequestID int64
}
