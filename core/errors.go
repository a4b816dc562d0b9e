package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind classifies an error so callers decide by kind, never by text.
type Kind int

// Error kinds.
const (
	KindUnknown        Kind = iota
	KindInvalid             // bad input from a user or a config
	KindNotFound            // a named thing does not exist
	KindRateLimited         // 429: slow down, maybe with RetryAfter
	KindAuth                // 401/403: credential refused
	KindBilling             // quota or credit exhausted
	KindUnavailable         // 5xx, overloaded, connection refused
	KindTimeout             // deadline exceeded talking to a dependency
	KindContextTooLong      // the prompt does not fit the model
	KindBadRequest          // 400 the provider will not accept: do not retry
	KindMalformed           // a dependency answered with something unreadable
)

var kindNames = [...]string{"unknown", "invalid", "not_found", "rate_limited", "auth", "billing", "unavailable", "timeout", "context_too_long", "bad_request", "malformed"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error with a kind. Msg is safe to show to a user; Err is the
// cause for the log.
type Error struct {
	Kind       Kind
	Msg        string
	Err        error
	RetryAfter time.Duration // for KindRateLimited, when the server said
	// Recheck, when set and shorter than RetryAfter, is when a try may
	// find out sooner that the wait is over: the router's next probe of a
	// cooling credential.
	Recheck time.Duration
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "" && e.Err != nil && e.Msg != e.Err.Error():
		return e.Msg + ": " + e.Err.Error()
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.Kind.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of kind k with a formatted message; %w works.
func Errorf(k Kind, format string, args ...any) error {
	// The formatted error already holds the text of its %w causes and
	// unwraps to them (one or several); Msg is its text.
	err := fmt.Errorf(format, args...)
	return &Error{Kind: k, Msg: err.Error(), Err: err}
}

// ErrFiltered is in the chain of an error (of kind KindInvalid) for a
// request an AI provider's safety filter refused: the user is told so,
// and neither the model nor the credential is blamed for it.
var ErrFiltered = errors.New("the provider's safety filter refused the request")

// ErrEmptyAnswer is in the chain of an error (of kind KindMalformed) for
// an answer with no text and no tool call: the user is told the AI sent
// nothing, not that it sent something unreadable.
var ErrEmptyAnswer = errors.New("the model returned an empty answer")

// ErrMessageTooLong is in the chain of an error (of kind
// KindContextTooLong) for a message that alone does not fit the model:
// its Msg says so to the user, since /new would not help.
var ErrMessageTooLong = errors.New("the message alone does not fit the model's context window")

// ErrToolResultsTooLong is in the chain of an error (of kind
// KindContextTooLong) for an answer whose tool results made the prompt
// too long for the model: its Msg says so to the user.
var ErrToolResultsTooLong = errors.New("the tool results do not fit the model's context window")

// ErrRecipientGone is in the chain of an error (of kind KindBadRequest)
// for a send the platform refused because the chat takes no messages from
// the bot any more: the user blocked it, it was removed from the group,
// the account is gone. Nobody is left to tell: the answer is dropped
// without an apology (sent to the same chat) or an operator event.
var ErrRecipientGone = errors.New("the chat no longer takes the bot's messages")

// ErrorKind returns the kind of the first *Error in err's chain.
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return KindTimeout
	}
	return KindUnknown
}

// RetryAfter returns the server's requested wait, if any error in the
// chain carries one.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// RecheckAfter returns the Recheck hint of err (0 when none).
func RecheckAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.Recheck
	}
	return 0
}

// Refusal reports an error a channel stops on for good (core.Channel's
// Run): the platform refused the credential (KindAuth) or the config
// cannot work (KindInvalid).
func Refusal(err error) bool {
	k := ErrorKind(err)
	return k == KindAuth || k == KindInvalid
}

// Transient reports whether trying the same request again later may work.
func Transient(err error) bool {
	return Passing(err) || ErrorKind(err) == KindUnknown
}

// Passing says err is a failure known to pass: an outage (a 5xx, an
// unreachable server), a rate limit, a timeout. Unlike Transient, a
// failure of no known kind is not: trying again without end is only for
// these.
func Passing(err error) bool {
	switch ErrorKind(err) {
	case KindRateLimited, KindUnavailable, KindTimeout:
		return true
	}
	return false
}
