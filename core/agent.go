package core

import "context"

// Turn is one request to answer, as the gateway hands it to the Agent.
type Turn struct {
	RequestID int64
	Session   Session
	In        Inbound
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
}

// Agent answers a turn: the orchestrator.
type Agent interface {
	Answer(ctx context.Context, t Turn) (Answer, error)
}

// Hooks rewrite messages before and answers after the agent (Lua).
type Hooks interface {
	// Pre may rewrite the text or drop the message (drop=true, reason for
	// the log); meta is attached to the turn.
	Pre(ctx context.Context, in Inbound, text string) (out string, meta map[string]string, drop bool, err error)
	// Post may rewrite the answer.
	Post(ctx context.Context, in Inbound, answer string) (string, error)
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
