package core

import "context"

// Turn is one request to answer, as the gateway hands it to the Agent.
type Turn struct {
	RequestID int64
	Session   Session
	In        Inbound
	// Admin says the sender is an admin of the channel, as
	// CommandRequest.Admin does (channels.<x>.admins, the operator of the
	// console, an auth provider's admin).
	Admin bool
	// Text is the message as the pre-hooks left it.
	Text string
	// Model is a model reference this turn must use ("" = let the router
	// choose); Exclude lists models that must not answer (escalation).
	Model   string
	Exclude []string
	// Retry says this turn re-answers the previous question: the history
	// already ends with it, so Text is not appended again.
	Retry bool
	// Metadata is what hooks attached to the message.
	Metadata map[string]string
	// Attachments are the images of the message (in the media store),
	// for a model that can see them.
	Attachments []Attachment
	// Stream, when set, is shown the answer while it is written.
	Stream Stream
}

// Stream receives an answer while the agent writes it. Its methods are
// called on the agent's goroutine, one at a time, and return at once (the
// platform calls happen elsewhere).
type Stream interface {
	// Delta adds text to the answer being written.
	Delta(text string)
	// Status shows a short line while tools run ("running calc…"); the
	// next Delta starts the answer's text afresh.
	Status(line string)
}

// Answer is the Agent's result: the reply text and the new history
// entries of this turn (the user message, tool calls and results, the
// assistant message) for the gateway to persist atomically with the reply.
type Answer struct {
	Text     string
	Messages []ChatMessage
	Model    string
	TaskType string
	Reason   string
	Usage    Usage
	// Metadata is what the pre-hooks attached to the turn; the gateway
	// stores it with the reply.
	Metadata map[string]string
	// Files are the files the tools made during the turn (Data set); they
	// are stored and sent with the answer.
	Files []Attachment
}

// Agent answers a turn: the orchestrator.
type Agent interface {
	Answer(ctx context.Context, t Turn) (Answer, error)
}

// HookInput is what hooks see of the turn being answered.
type HookInput struct {
	// In is the message as the channel delivered it (for a re-answer
	// after a 👎, the reaction's conversation, user and message).
	In      Inbound
	Session Session
	// Text is the text to answer: the message, or for a re-answer the
	// earlier question; after the pre-hooks, as they left it.
	Text string
	// Metadata is what the pre-hooks attached (nil before them).
	Metadata map[string]string
}

// PreResult is what the pre-hooks decided about a turn.
type PreResult struct {
	// Text is the text to answer, possibly rewritten.
	Text string
	// Metadata travels with the turn to the agent and the post-hooks.
	Metadata map[string]string
	// Drop stops the turn before the LLM; Reason is logged and recorded
	// with the request.
	Drop   bool
	Reason string
	// Reply, when set, is sent as the answer and the agent is not called
	// (a filter's drop notice, a hook that answers by rule).
	Reply string
}

// Hooks run before and after the agent on every answer the gateway gives
// (first answer, /retry, escalation, a re-answer after 👎): Lua scripts
// and gRPC hook plugins. Safe for concurrent use.
type Hooks interface {
	// Pre may rewrite the text, attach metadata, drop the turn or answer
	// it directly.
	Pre(ctx context.Context, in HookInput) (PreResult, error)
	// Post may rewrite the answer before it is stored and sent; in holds
	// the text and metadata the agent answered.
	Post(ctx context.Context, in HookInput, answer string) (string, error)
}

// StreamSafety is an optional Hooks capability. A post-hook that must see
// the whole answer before the user sees any of it (a redaction hook) is
// not stream-safe: the answers of the conversations it applies to are
// then sent only once the post-hooks ran. Hooks without this method are
// stream-safe.
type StreamSafety interface {
	// StreamSafe reports whether the answer to in may be shown while it
	// is written.
	StreamSafe(in HookInput) bool
}

// SignalSink receives quality signals (the router's learning).
type SignalSink interface {
	RecordSignal(ctx context.Context, s Signal) error
}

// GenerateRequest is one LLM call outside the agent loop: a Lua hook's
// ctx.llm, memory compaction, a plugin's call to the LLM API.
type GenerateRequest struct {
	// Messages have the roles system, user and assistant; system messages
	// become the system prompt.
	Messages []ChatMessage
	// Model is a catalog alias or a model reference; "" lets the router
	// choose.
	Model string
	// Purpose tags the usage ledger ("lua", "compaction", "plugin").
	Purpose string
	// Conversation, SessionID and UserID attribute the call in the ledger
	// and to the per-chat budget; all may be zero.
	Conversation ConversationKey
	SessionID    int64
	UserID       string
	// MaxTokens bounds the answer (0 = the model's default).
	MaxTokens int
}

// Generated is the answer to a GenerateRequest.
type Generated struct {
	Text  string
	Model string // the model reference that answered
	Usage Usage
}

// Generator makes one LLM call by catalog alias or reference, under the
// same local/cloud concurrency limits as every other call, counted in the
// usage ledger. routing.Router implements it. Safe for concurrent use.
type Generator interface {
	Generate(ctx context.Context, r GenerateRequest) (Generated, error)
}
