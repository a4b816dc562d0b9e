package core

import (
	"context"
)

// Interceptor looks at each message before the commands and the agent
// (quality-signal follow-ups, escalation). It decides what to answer and
// never calls the agent itself: the gateway turns its decision into work.
type Interceptor interface {
	Intercept(ctx context.Context, req CommandRequest) (Decision, error)
}

// ReactionInterceptor is an optional Interceptor capability: it may ask
// for an answer to a judged reaction (routing re-answers a 👎 on the
// latest answer with the next model when routing.escalate_on_reaction is
// on). The gateway has already recorded the reaction's signal.
type ReactionInterceptor interface {
	InterceptReaction(ctx context.Context, r Reaction, judged *Reply, s Session) (Decision, error)
}

// Decision is an interceptor's verdict on a message. The zero Decision
// lets the message go on to the commands and the agent.
type Decision struct {
	// Reply answers the message with this text as it is, like a command.
	Reply string
	// Turn answers the message by answering this turn instead, through the
	// same pipeline as every answer (pre-hooks, agent, post-hooks).
	Turn *TurnOverride
}

// Taken reports whether the interceptor took the message.
func (d Decision) Taken() bool { return d.Reply != "" || d.Turn != nil }

// TurnOverride describes a turn answered in place of the message as
// written: an earlier question answered again (/retry, "no, try again",
// a 👎 re-answer).
type TurnOverride struct {
	// Text is the text to answer.
	Text string
	// Retry says the history already ends with Text: the agent answers it
	// again instead of appending it.
	Retry bool
	// Model forces a model ("" = the router chooses); Exclude lists models
	// that must not answer.
	Model   string
	Exclude []string
	// Finish, when set, sees the agent's answer before the post-hooks: it
	// learns which model answered and may add a note to the text.
	Finish func(*Answer)
	// Attachments are the images of the message (from its files); Echo is
	// shown ahead of the answer (a voice note's transcript).
	Attachments []Attachment
	Echo        string
}
