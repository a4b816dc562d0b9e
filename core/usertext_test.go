package core_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestUserMessagesNameTheCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&core.Error{Kind: core.KindTimeout, RetryAfter: 5 * time.Minute}, "did not answer in time. Please try again in 5 minutes."},
		{&core.Error{Kind: core.KindRateLimited, RetryAfter: time.Minute}, "rate limiting me. Please try again in 1 minute."},
		{&core.Error{Kind: core.KindUnavailable}, "not answering right now. Please try again later."},
		// A file the platform did not serve is no provider's failure.
		{&core.DownloadError{Name: "a.pdf", Platform: "discord", Err: &core.Error{Kind: core.KindUnavailable}}, "I could not download a.pdf from Discord. Please try again later."},
		{&core.DownloadError{Platform: "slack", Err: &core.Error{Kind: core.KindTimeout}}, "I could not download the file from Slack."},
		// A platform's refusal (Telegram's getFile, an HTTP 404) is no
		// sentence for the user either.
		{&core.DownloadError{Name: "a.pdf", Platform: "discord", Err: &core.Error{Kind: core.KindBadRequest, Msg: "file download: HTTP 404"}}, "I could not download a.pdf from Discord."},
		// A safety filter's refusal names the filter and what to do, not
		// the provider's operator hint.
		{&core.Error{Kind: core.KindInvalid, Msg: "provider acme: HTTP 400: the provider's safety filter refused the request", Err: fmt.Errorf("%w: content_filter: filtered", core.ErrFiltered)},
			"could not answer that: the AI provider's safety filter refused this request. Try rephrasing it; if it happens again, earlier messages may be the cause: /new starts a fresh conversation."},
		// An empty answer is no unreadable one.
		{core.Errorf(core.KindMalformed, "model p/m: %w", core.ErrEmptyAnswer), "could not answer that: the AI model sent back an empty answer. Please try again, or rephrase your message."},
		{core.Errorf(core.KindMalformed, "model p/m: bad JSON"), "an answer I could not read"},
		// The conversation is too long: /new helps.
		{&core.Error{Kind: core.KindContextTooLong, Msg: "provider acme: HTTP 400: prompt too long"}, "the conversation is too long for the model. Send /new to start a fresh one."},
		// The message itself is too long: /new would not help, the
		// orchestrator's sentence says what would.
		{&core.Error{Kind: core.KindContextTooLong, Msg: "your message (about 200 KB) is too long", Err: core.ErrMessageTooLong}, "could not answer that: your message (about 200 KB) is too long"},
		// Unless the cause says what to tell the user.
		{&core.DownloadError{Platform: "slack", Err: &core.Error{Kind: core.KindInvalid, Msg: "Slack sent me a sign-in page"}}, "could not answer that: Slack sent me a sign-in page"},
	} {
		if got := core.UserMessage(tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("UserMessage(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	for _, tt := range []struct {
		err  error
		wait time.Duration
		want string
	}{
		{&core.Error{Kind: core.KindTimeout}, time.Minute, "answering too slowly. I will try again in about 1 minute, and answer as soon as it works."},
		{&core.Error{Kind: core.KindUnavailable}, 8 * time.Second, "servers are failing for the moment. I will try again in about 8 seconds, and answer as soon as it works."},
		{errors.New("disk hiccup"), 300 * time.Millisecond, "I hit a problem on my side. I will try again in about 1 second, and answer as soon as it works."},
		{&core.Error{Kind: core.KindRateLimited, RetryAfter: 20 * time.Second}, 20 * time.Second, "asked me to slow down. I will answer in about 20 seconds."},
		{&core.DownloadError{Name: "a.png", Platform: "telegram", Err: &core.Error{Kind: core.KindUnavailable}}, 8 * time.Second, "Telegram has not let me download a.png yet. I will try again in about 8 seconds"},
	} {
		if got := core.DelayMessage(tt.err, tt.wait); !strings.HasPrefix(got, "⏳ Your answer is delayed: ") || !strings.Contains(got, tt.want) {
			t.Errorf("DelayMessage(%v, %v) = %q, want %q", tt.err, tt.wait, got, tt.want)
		}
	}
}

// A delay notice is not an apology: for every kind, and for a file that
// could not be downloaded yet, it shares no reason with the apology
// UserMessage gives (a user, or a check for apologies,
// must not read "not answering right now" while the answer is coming).
func TestDelayMessageIsNoApology(t *testing.T) {
	var errs []error
	for k := core.KindUnknown; k <= core.KindMalformed; k++ {
		errs = append(errs, &core.Error{Kind: k}, &core.DownloadError{Name: "a.png", Platform: "telegram", Err: &core.Error{Kind: k}})
	}
	for _, err := range errs {
		apology := strings.TrimPrefix(core.UserMessage(err), "Sorry, I could not answer that: ")
		reason, _, _ := strings.Cut(apology, ".")
		delay := core.DelayMessage(err, time.Minute)
		if strings.Contains(delay, "Sorry") || strings.Contains(delay, reason) {
			t.Errorf("%v: the delay notice %q repeats the apology %q", err, delay, apology)
		}
	}
}
