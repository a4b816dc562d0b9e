package core

import "time"

// Observer is told what happens to each event on its way through the
// gateway, for metrics. Its methods are called on the event's own
// goroutine, concurrently for different events, and must return at once
// (count, don't do I/O). gateway.Options.Observer nil observes nothing.
//
// Labels passed to it are bounded: channel names, stages and outcomes,
// never a chat or user id.
type Observer interface {
	// Accepted is called once a message is committed to the queue (a
	// duplicate or a message refused for a full conversation is not).
	Accepted(channel string)
	// Stage is called when one stage of a request is over; d is how long
	// it took.
	Stage(channel string, s Stage, d time.Duration)
	// Finished is called with the outcome of each attempt at a request,
	// and with OutcomeRefused for a message refused at intake.
	Finished(channel string, kind EventKind, o Outcome)
	// HookFailed is called when the pre-hooks (StagePreHooks) or the
	// post-hooks (StagePostHooks) returned an error.
	HookFailed(channel string, s Stage)
}

// Stage is one step of a request's path.
type Stage string

// Stages the gateway times. The LLM calls and tool runs inside the agent
// are timed by the router and the tool runner.
const (
	// StageQueue is from accepting a message to its first claim.
	StageQueue Stage = "queue"
	// StagePreHooks, StageAgent and StagePostHooks are the parts of the
	// one answer pipeline.
	StagePreHooks  Stage = "pre_hooks"
	StageAgent     Stage = "agent"
	StagePostHooks Stage = "post_hooks"
	// StageDelivery is sending a stored reply's parts, pacing included.
	StageDelivery Stage = "delivery"
)

// Outcome is how one attempt at a request ended.
type Outcome string

// Outcomes of an attempt.
const (
	// OutcomeAnswered: done; for a message, its answer was sent.
	OutcomeAnswered Outcome = "answered"
	// OutcomeRefused: turned away at intake, never queued: the sender may
	// not talk to the bot (a pairing code was sent, or nothing).
	OutcomeRefused Outcome = "refused"
	// OutcomeDropped: done; a pre-hook dropped the message.
	OutcomeDropped Outcome = "dropped"
	// OutcomeReleased: back in the queue at shutdown.
	OutcomeReleased Outcome = "released"
	// OutcomeWaiting: back in the queue until a cooling provider is free.
	OutcomeWaiting Outcome = "waiting"
	// OutcomeRetried: failed, to be tried again.
	OutcomeRetried Outcome = "retried"
	// OutcomeFailed: failed for good; the user got the reason.
	OutcomeFailed Outcome = "failed"
)
