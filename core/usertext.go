package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// UserMessage is the short text a user sees when their request failed.
func UserMessage(err error) string {
	const pre = "Sorry, I could not answer that: "
	again := "Please try again later."
	if d := RetryAfter(err); d > 0 {
		again = fmt.Sprintf("Please try again in %s.", HumanDuration(d))
	}
	var de *DownloadError
	if errors.As(err, &de) && !(ErrorKind(err) == KindInvalid && hasUserText(err)) {
		return pre + fmt.Sprintf("I could not download %s from %s. %s", de.what(), platformName(de.Platform), again)
	}
	if errors.Is(err, ErrFiltered) {
		return pre + "the AI provider's safety filter refused this request. Try rephrasing it; if it happens again, earlier messages may be the cause: /new starts a fresh conversation."
	}
	if errors.Is(err, ErrEmptyAnswer) {
		return pre + "the AI model sent back an empty answer. Please try again, or rephrase your message."
	}
	switch ErrorKind(err) {
	case KindRateLimited:
		if RetryAfter(err) == 0 {
			again = "Please try again in a minute."
		}
		return pre + "the AI provider is rate limiting me. " + again
	case KindAuth:
		return pre + "the AI provider refused my credentials. The operator has been told (see the log)."
	case KindBilling:
		return pre + "the AI provider's quota or credit is used up. The operator has been told (see the log)."
	case KindTimeout:
		return pre + "the AI provider did not answer in time. " + again
	case KindUnavailable:
		return pre + "the AI provider is not answering right now. " + again
	case KindContextTooLong:
		var e *Error
		if (errors.Is(err, ErrMessageTooLong) || errors.Is(err, ErrToolResultsTooLong)) && errors.As(err, &e) && e.Msg != "" {
			return pre + e.Msg
		}
		return pre + "the conversation is too long for the model. Send /new to start a fresh one."
	case KindMalformed:
		return pre + "the AI provider sent an answer I could not read. The error is logged; please try again."
	case KindInvalid, KindBadRequest:
		var e *Error
		if errors.As(err, &e) && e.Msg != "" {
			return pre + e.Msg // the cause stays in the log
		}
		return pre + "the request was not valid."
	}
	return pre + "something went wrong on my side. The error is logged; please try again."
}

// hasUserText says whether err is invalid input whose message is for
// the user (UserMessage shows it as it is).
func hasUserText(err error) bool {
	var e *Error
	k := ErrorKind(err)
	return (k == KindInvalid || k == KindBadRequest) && errors.As(err, &e) && e.Msg != ""
}

// platformName is a channel's name as its users know it ("telegram" →
// "Telegram").
func platformName(channel string) string {
	if channel == "" {
		return "the chat platform"
	}
	return strings.ToUpper(channel[:1]) + channel[1:]
}

// DelayMessage is what a user is told once when a failure delays their
// answer by more than a few seconds: why, and about when the next try is
// (in wait). It shares no phrase with the apologies of UserMessage: the
// answer is still coming.
func DelayMessage(err error, wait time.Duration) string {
	switch ErrorKind(err) {
	case KindUnavailable, KindTimeout, KindUnknown:
		// An outage's wait is this gateway's backoff, not a time the
		// provider gave: it may take longer.
		return NextTryMessage(err, wait)
	}
	return fmt.Sprintf("⏳ Your answer is delayed: %s. I will answer in about %s.", delayReason(err), HumanDuration(wait))
}

// NextTryMessage is DelayMessage naming the next try (in wait) instead of
// the answer: for an outage, whose wait is the gateway's backoff, and for
// a cooldown the router probes before it ends (core.Error.Recheck).
func NextTryMessage(err error, wait time.Duration) string {
	return fmt.Sprintf("⏳ Your answer is delayed: %s. I will try again in about %s, and answer as soon as it works.", delayReason(err), HumanDuration(wait))
}

// LastTryMessage is DelayMessage when the provider said it would not be
// back before queue.max_wait ends, in wait: no answer is promised.
func LastTryMessage(err error, wait time.Duration) string {
	return fmt.Sprintf("⏳ Your answer is delayed: %s. I will keep trying for about %s, and tell you if I cannot answer.", delayReason(err), HumanDuration(wait))
}

// delayReason says why an answer is delayed by err.
func delayReason(err error) string {
	var de *DownloadError
	if errors.As(err, &de) {
		// (Not UserMessage's "I could not download ...": the answer is
		// still coming.)
		return fmt.Sprintf("%s has not let me download %s yet", platformName(de.Platform), de.what())
	}
	why := "the AI provider is busy"
	switch ErrorKind(err) {
	case KindRateLimited:
		why = "the AI provider asked me to slow down"
	case KindTimeout:
		why = "the AI provider is answering too slowly"
	case KindUnavailable:
		why = "the AI provider's servers are failing for the moment"
	case KindUnknown:
		why = "I hit a problem on my side"
	}
	return why
}
