package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// Send implements core.Channel: it posts one mrkdwn part with
// chat.postMessage in the thread the message's reply_in_thread decision
// chose (a reaction's re-answer, which has no message, goes to the
// conversation's thread). A slash command's answer is ephemeral. A 429 is
// waited out (Retry-After) and the part sent once more; an ok:false
// answer is an error with Slack's code. It returns "<channel>:<ts>".
func (b *Bot) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	channel := to.Conversation.Chat
	if channel == "" {
		return "", core.Errorf(core.KindInvalid, "slack: conversation %s has no channel", to.Conversation)
	}
	if to.Meta[metaKind] == kindSlash {
		return b.sendEphemeral(ctx, to, part)
	}
	thread, ok := to.Meta[metaReplyTS]
	if !ok {
		thread = to.Conversation.Thread
	}
	opts := []slack.MsgOption{slack.MsgOptionText(part, false)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	for retried := false; ; retried = true {
		if err := b.pace.Wait(ctx, channel, false, to.Notice); err != nil {
			return "", err
		}
		_, ts, err := b.api.PostMessageContext(ctx, channel, opts...)
		if err == nil {
			b.credentialWorks(keyBotToken)
			if thread != "" {
				b.answered.Add(threadKey(channel, thread))
			}
			return platformID(channel, ts), nil
		}
		err = b.classify("chat.postMessage", keyBotToken, err)
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) && !retried {
			wait := max(rl.RetryAfter, time.Second)
			b.log.Warn("Slack rate limited chat.postMessage: waiting before sending the part again", "channel", channel, "retry_after", wait)
			if err := b.sleep(ctx, wait); err != nil {
				return "", err
			}
			continue
		}
		return "", b.sendFailed("chat.postMessage", channel, err)
	}
}

// sendFailed logs a refused part and records a refused token for Healthy.
func (b *Bot) sendFailed(method, channel string, err error) error {
	if core.ErrorKind(err) == core.KindAuth {
		b.refused(keyBotToken, err)
	}
	if ctx := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded); !ctx {
		b.log.Error("Slack did not take a reply part", "method", method, "channel", channel, "slack_error", slackCode(err), "err", err)
	}
	return err
}

// sendEphemeral answers a slash command so only its user sees it: on the
// command's response_url while it is valid, else chat.postEphemeral.
func (b *Bot) sendEphemeral(ctx context.Context, to core.Outbound, part string) (string, error) {
	channel := to.Conversation.Chat
	if url := b.responseURL(ctx, to.ReplyTo); url != "" {
		err := slack.PostWebhookCustomHTTPContext(ctx, url, b.http, &slack.WebhookMessage{Text: part, ResponseType: "ephemeral"})
		if err == nil {
			if to.Part >= to.Parts-1 {
				b.forgetResponse(ctx, to.ReplyTo)
			}
			return fmt.Sprintf("ephemeral:%s:%d", to.ReplyTo, to.Part), nil
		}
		// The response_url is a credential for the channel: the error names it.
		err = toolkit.NewScrubber(b.cfg.BotToken.Value(), b.cfg.AppToken.Value(), b.cfg.SigningSecret.Value(), url).Error(err)
		b.log.Warn("answering a slash command on its response_url failed; trying chat.postEphemeral", "err", err)
	}
	ts, err := b.api.PostEphemeralContext(ctx, channel, to.Meta[metaUser], slack.MsgOptionText(part, false))
	if err != nil {
		return "", b.sendFailed("chat.postEphemeral", channel, b.classify("chat.postEphemeral", keyBotToken, err))
	}
	return "ephemeral:" + platformID(channel, ts), nil
}

// Working implements core.Indicator: the ack reaction on the user's
// message until stop is called (Slack has no typing indicator for bots).
func (b *Bot) Working(ctx context.Context, in core.Inbound) (stop func()) {
	name := strings.Trim(b.cfg.AckReaction, ": ")
	channel, ts, ok := parsePlatformID(in.MessageID)
	if name == "" || !ok || in.Meta[metaKind] == kindSlash {
		return func() {}
	}
	item := slack.NewRefToMessage(channel, ts)
	return toolkit.Working(ctx, toolkit.WorkingOptions{
		Ack: func(ctx context.Context) {
			if err := b.api.AddReactionContext(ctx, name, item); err != nil && ctx.Err() == nil && slackCode(err) != "already_reacted" {
				b.ackFailed(channel, name, err)
			}
		},
		Unack: func(ctx context.Context) {
			if err := b.api.RemoveReactionContext(ctx, name, item); err != nil && ctx.Err() == nil && slackCode(err) != "no_reaction" {
				b.log.Debug("reactions.remove failed", "channel", channel, "err", b.classify("reactions.remove", keyBotToken, err))
			}
		},
	})
}

// ackFailed logs an ack reaction Slack refused. A refusal every message
// will meet (a missing scope, an unknown emoji name) is a warning once
// per process, naming the fix; anything else is logged at debug level.
func (b *Bot) ackFailed(channel, name string, err error) {
	cerr := b.classify("reactions.add", keyBotToken, err)
	code := slackCode(err)
	if code != "missing_scope" && code != "invalid_name" {
		b.log.Debug("reactions.add failed", "channel", channel, "err", cerr)
		return
	}
	b.mu.Lock()
	warned := b.ackWarned
	b.ackWarned = true
	b.mu.Unlock()
	if warned {
		b.log.Debug("reactions.add failed", "channel", channel, "err", cerr)
		return
	}
	hint := "set channels.slack.ack_reaction to an emoji name the workspace has (without colons), or \"\" for none"
	if code == "missing_scope" {
		hint = "or set channels.slack.ack_reaction: \"\" for none"
	}
	b.log.Warn("Slack refused the ack reaction; messages are answered without it", "ack_reaction", name, "err", cerr, "fix", hint)
}
