package slack

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

var (
	_ core.Streamer       = (*Bot)(nil)
	_ core.NativeStreamer = (*Bot)(nil)
	_ core.Deleter        = (*Bot)(nil)
)

// editInterval is the least time between two updates of a streamed
// message: chat.update is a Tier 3 method (about 50 a minute), and one
// update per 1.2s leaves room for the other conversations.
const editInterval = 1200 * time.Millisecond

// replyThread is the thread a reply to to goes to ("" = none).
func replyThread(to core.Outbound) string {
	if t, ok := to.Meta[metaReplyTS]; ok {
		return t
	}
	return to.Conversation.Thread
}

// Streaming implements core.Streamer: channels.slack.streaming; native
// (Slack's streaming messages) only in a thread, where Slack offers it;
// a slash command's ephemeral answer is never streamed.
func (b *Bot) Streaming(to core.Outbound) core.StreamPolicy {
	if to.Meta[metaKind] == kindSlash {
		return core.StreamPolicy{Mode: core.StreamOff}
	}
	return toolkit.StreamPolicy(b.cfg.Streaming, replyThread(to) != "", editInterval)
}

// Draft implements core.Streamer.
func (b *Bot) Draft(text string) []core.DraftPart {
	return textfmt.Draft(text, MaxMessage, textfmt.ToSlackMrkdwn, nil)
}

// Edit implements core.Streamer with chat.update.
func (b *Bot) Edit(ctx context.Context, to core.Outbound, id, part string) error {
	channel, ts, ok := parsePlatformID(id)
	if !ok {
		return core.Errorf(core.KindInvalid, "slack: %q is not a message id of this channel", id)
	}
	return b.webCall(ctx, channel, "chat.update", func(ctx context.Context) error {
		_, _, _, err := b.api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(part, false))
		return err
	})
}

// Delete implements core.Deleter with chat.delete.
func (b *Bot) Delete(ctx context.Context, to core.Outbound, id string) error {
	channel, ts, ok := parsePlatformID(id)
	if !ok {
		return core.Errorf(core.KindInvalid, "slack: %q is not a message id of this channel", id)
	}
	return b.webCall(ctx, channel, "chat.delete", func(ctx context.Context) error {
		_, _, err := b.api.DeleteMessageContext(ctx, channel, ts)
		return err
	})
}

// ShowDraft implements core.NativeStreamer: chat.startStream opens the
// message in the reply's thread with the Markdown so far, then
// chat.appendStream adds what was written since. Slack renders the
// Markdown itself.
func (b *Bot) ShowDraft(ctx context.Context, to core.Outbound, d core.NativeDraft) (string, error) {
	channel := to.Conversation.Chat
	thread := replyThread(to)
	if thread == "" {
		return "", core.ErrNoNativeStream
	}
	if d.ID == "" {
		var ts string
		err := b.webCall(ctx, channel, "chat.startStream", func(ctx context.Context) error {
			opts := []slack.MsgOption{slack.MsgOptionTS(thread), slack.MsgOptionMarkdownText(d.Raw)}
			if u := to.Meta[metaUser]; u != "" {
				opts = append(opts, slack.MsgOptionRecipientUserID(u), slack.MsgOptionRecipientTeamID(b.identity().TeamID))
			}
			var err error
			_, ts, err = b.api.StartStreamContext(ctx, channel, opts...)
			return err
		})
		if err != nil && ctx.Err() == nil && streamRefused(err) {
			// Whatever refused the stream (ok:false, a server without
			// the method, a token that may not stream), a message that
			// is posted and edited still shows the answer while it is
			// written.
			return "", errors.Join(core.ErrNoNativeStream, err)
		}
		if err != nil {
			return "", err
		}
		b.answered.Add(threadKey(channel, thread))
		return platformID(channel, ts), nil
	}
	_, ts, ok := parsePlatformID(d.ID)
	if !ok || !strings.HasPrefix(d.Raw, d.Shown) {
		// The text does not continue what the stream shows: nothing to
		// append; the final delivery makes the message right.
		return d.ID, nil
	}
	add := d.Raw[len(d.Shown):]
	if add == "" {
		return d.ID, nil
	}
	return d.ID, b.webCall(ctx, channel, "chat.appendStream", func(ctx context.Context) error {
		_, _, err := b.api.AppendStreamContext(ctx, channel, ts, slack.MsgOptionMarkdownText(add))
		return err
	})
}

// streamRefused says err refused chat.startStream for good rather than
// failing for now: a failure for now (a timeout, a 5xx other than 501,
// a rate limit) may have opened the stream all the same, and a second
// message posted beside it would show the answer twice.
func streamRefused(err error) bool {
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code == http.StatusNotImplemented {
		return true
	}
	return !core.Passing(err)
}

// EndDraft implements core.NativeStreamer: chat.stopStream ends the
// message, then chat.update gives it the final part.
func (b *Bot) EndDraft(ctx context.Context, to core.Outbound, d core.NativeDraft, part string) (string, error) {
	channel, ts, ok := parsePlatformID(d.ID)
	if !ok {
		return b.Send(ctx, to, part)
	}
	if err := b.webCall(ctx, channel, "chat.stopStream", func(ctx context.Context) error {
		_, _, err := b.api.StopStreamContext(ctx, channel, ts)
		return err
	}); err != nil {
		b.log.Warn("chat.stopStream failed; updating the message anyway", "channel", channel, "err", err)
	}
	return d.ID, b.Edit(ctx, to, d.ID, part)
}

// webCall makes one paced Web API call for a reply, waiting out one 429.
func (b *Bot) webCall(ctx context.Context, channel, method string, fn func(context.Context) error) error {
	for retried := false; ; retried = true {
		if err := b.pace.Wait(ctx, channel, false, false); err != nil {
			return err
		}
		err := fn(ctx)
		if err == nil {
			b.credentialWorks(keyBotToken)
			return nil
		}
		err = b.classify(method, keyBotToken, err)
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) && !retried {
			if err := b.sleep(ctx, max(rl.RetryAfter, time.Second)); err != nil {
				return err
			}
			continue
		}
		return b.sendFailed(method, channel, err)
	}
}
