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
