package discord

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// unackTimeout bounds taking the ack reaction back.
const unackTimeout = 10 * time.Second

// noPings is the allowed_mentions of every reply: nobody is pinged by
// what the LLM writes (@everyone, @here, roles, users); only the user a
// reply answers, when replied is set.
func noPings(replied bool) *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, RepliedUser: replied}
}

// Send implements core.Channel: one part of a reply. The first part of
// an answer to a message references it (a Discord reply); an answer to
// an application command edits the command's deferred response, and its
// further parts follow it up (once the interaction token expired, or
// after a restart, they go to the channel instead). Discord's rate limits
// are waited out by discordgo; a call that still fails transiently is
// retried with backoff, and the error reported when it gives up. It
// returns the id of the sent message.
func (b *Bot) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	if id := to.Meta[metaInteraction]; id != "" {
		it := b.interactions.get(id)
		if it == nil {
			it = b.keptInteraction(ctx, id) // received by another replica
		}
		if it != nil {
			select {
			case <-it.ready:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if it.deferred && b.now().Before(it.expires) {
				msgID, err := b.sendInteraction(ctx, id, it, to.Part, part, to.Meta[metaEphemeral] != "")
				if err == nil && to.Part >= to.Parts-1 {
					b.forgetInteraction(ctx, id)
				}
				if err == nil || !webhookGone(err) {
					return msgID, err
				}
				b.log.Info("the Discord command's answer window closed; the rest of the answer goes without it", "interaction", id)
			}
		}
		to.ReplyTo = "" // the command is not a message to reply to
		if user := to.Meta[metaUser]; user != "" {
			return b.sendPrivately(ctx, to, user, part)
		}
	}
	ch := target(to.Conversation)
	msg := &discordgo.MessageSend{Content: part, AllowedMentions: noPings(false)}
	if to.Part == 0 && to.ReplyTo != "" {
		no := false
		msg.Reference = &discordgo.MessageReference{MessageID: to.ReplyTo, ChannelID: ch, FailIfNotExists: &no}
		msg.AllowedMentions = noPings(true)
	}
	return b.post(ctx, ch, msg)
}

// sendPrivately sends part of the answer to a command of a guild that is
// for its user only (metaUser) when the interaction can no longer carry
// it (Discord's window closed, or its token went with a restart): to the
// user's direct messages, never to the guild's channel. When the user
// takes no direct messages from the bot, the channel gets a notice that
// shows nothing of the answer.
func (b *Bot) sendPrivately(ctx context.Context, to core.Outbound, user, part string) (string, error) {
	ch := target(to.Conversation)
	id, last := to.Meta[metaInteraction], to.Part >= to.Parts-1
	dm, err := b.directChannel(ctx, user)
	if err == nil {
		// The first part in the DMs says where the command was given.
		if lead := "The answer to your command in <#" + ch + ">:\n"; utf8.RuneCountInString(lead+part) <= MaxMessage && b.firstTime(id+" lead", last) {
			part = lead + part
		}
		var msgID string
		if msgID, err = b.post(ctx, dm, &discordgo.MessageSend{Content: part, AllowedMentions: noPings(false)}); err == nil {
			return msgID, nil
		}
	}
	if !dmRefused(err) {
		return "", err
	}
	b.log.Warn("a private answer could not go to the user's direct messages; the channel is told without it", "user", user, "err", err)
	if !b.firstTime(id+" notice", last) {
		return "", nil // the notice went with an earlier part
	}
	notice := "<@" + user + ">, the answer to your command is for you only, and Discord no longer lets me show it to you here. Your direct messages are closed to me: allow direct messages from this server's members and run the command again."
	return b.post(ctx, ch, &discordgo.MessageSend{Content: notice, AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, Users: []string{user}}})
}

// toldFor is how long firstTime remembers a key whose answer's last part
// has not come: one that never comes (its request failed for good) is
// forgotten then. A part sent later than that may lead again.
const toldFor = 6 * time.Hour

// firstTime reports whether key (an interaction's id and what was done
// for it) is seen for the first time in this answer; last, the answer's
// last part, forgets it.
func (b *Bot) firstTime(key string, last bool) bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, at := range b.told {
		if now.Sub(at) > toldFor {
			delete(b.told, k)
		}
	}
	_, seen := b.told[key]
	if last {
		delete(b.told, key)
	} else {
		b.told[key] = now
	}
	return !seen
}

// directChannel returns the id of the direct-message channel with user,
// opening it the first time (Discord answers the same channel again).
func (b *Bot) directChannel(ctx context.Context, user string) (string, error) {
	var id string
	err := b.retry(ctx, "open a direct message", func(ctx context.Context) error {
		c, err := b.rest.UserChannelCreate(user, discordgo.WithContext(ctx))
		if err != nil {
			return b.classify("POST /users/@me/channels", err)
		}
		id = c.ID
		return nil
	})
	return id, err
}

// dmRefused reports Discord refusing a direct message to a user (403:
// the user does not take them from the bot, or shares no server with it).
func dmRefused(err error) bool {
	return status(err) == http.StatusForbidden
}

// directMessages reports whether ch is a direct-message channel (asked
// of Discord: only when a send to it was refused with 50007).
func (b *Bot) directMessages(ctx context.Context, ch string) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := b.rest.Channel(ch, discordgo.WithContext(cctx))
	return err == nil && c.GuildID == "" && (c.Type == discordgo.ChannelTypeDM || c.Type == discordgo.ChannelTypeGroupDM)
}

// post sends msg to channel ch and returns the message's id.
func (b *Bot) post(ctx context.Context, ch string, msg *discordgo.MessageSend) (string, error) {
	// Every attempt of this send carries one nonce, enforced: a retry
	// after an answer that got lost (a timeout, a 502 that discordgo
	// retries itself) gets the message the first attempt made instead of
	// posting it twice.
	body := nonceSend{MessageSend: msg, Nonce: newNonce(), EnforceNonce: true}
	endpoint := discordgo.EndpointChannelMessages(ch)
	defer b.typing.Quiet(ctx, ch)()
	var sent *discordgo.Message
	err := b.retry(ctx, "send a message", func(ctx context.Context) error {
		raw, err := b.rest.RequestWithBucketID(http.MethodPost, endpoint, body, endpoint, discordgo.WithContext(ctx))
		if err != nil {
			if apiCode(err) == discordgo.ErrCodeCannotSendMessagesToThisUser && !b.directMessages(ctx, ch) {
				// 50007 says a user takes no DMs from the bot; in a
				// guild's channel (or one not known to be a DM) it is no
				// closed DM, and the operator hears of it.
				return &core.Error{Kind: core.KindBadRequest, Msg: "discord POST /channels/{id}/messages refused (50007) in a channel that is not a direct message", Err: b.scrub(err)}
			}
			return b.classify("POST /channels/{id}/messages", err)
		}
		var m discordgo.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("POST /channels/{id}/messages: unreadable answer: %w", err)
		}
		sent = &m
		return nil
	})
	if err != nil {
		return "", err
	}
	return sent.ID, nil
}

// nonceSend is a message with the nonce Discord deduplicates a repeated
// send by (discordgo v0.29's MessageSend has no field for it).
type nonceSend struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce"`
	EnforceNonce bool   `json:"enforce_nonce"`
}

// newNonce is a random nonce of 24 characters (Discord takes at most 25).
func newNonce() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sendInteraction posts part of an answer to an application command:
// part 0 replaces the deferred "thinking" response (ephemeral when that
// was), later parts follow it, ephemeral when the answer is.
func (b *Bot) sendInteraction(ctx context.Context, id string, it *interaction, n int, part string, ephemeral bool) (string, error) {
	i := &discordgo.Interaction{ID: id, AppID: it.appID, Token: it.token}
	var flags discordgo.MessageFlags
	if ephemeral {
		flags = discordgo.MessageFlagsEphemeral
	}
	var sent *discordgo.Message
	err := b.retry(ctx, "answer a command", func(ctx context.Context) error {
		var m *discordgo.Message
		var err error
		if n == 0 {
			m, err = b.rest.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &part, AllowedMentions: noPings(false)}, discordgo.WithContext(ctx))
		} else {
			m, err = b.rest.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: part, AllowedMentions: noPings(false), Flags: flags}, discordgo.WithContext(ctx))
		}
		if err != nil {
			return b.classify("interaction webhook", b.scrubInteraction(err, it.token))
		}
		sent = m
		return nil
	})
	if err != nil {
		return "", err
	}
	return sent.ID, nil
}

// webhookGone reports an interaction webhook Discord no longer accepts
// (the token expired: 401 Invalid Webhook Token, 404 Unknown Webhook).
func webhookGone(err error) bool {
	s := status(err)
	return s == http.StatusUnauthorized || s == http.StatusNotFound
}

// retry runs one REST call with the channel's retry policy.
func (b *Bot) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	return toolkit.Retry(ctx, toolkit.RetryOptions{
		Attempts: b.o.SendAttempts,
		Sleep:    b.sleep,
		OnRetry: func(n int, wait time.Duration, err error) {
			b.log.Warn("a Discord call failed; retrying", "call", what, "attempt", n, "in", wait, "err", err)
		},
	}, func(ctx context.Context) error {
		err := fn(ctx)
		if err != nil && ctx.Err() == nil && !core.Transient(err) {
			b.log.Warn("Discord refused a call", "call", what, "err", err)
		}
		return err
	})
}

// status is the HTTP status of a discordgo REST error (0 for others).
func status(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

// apiCode is Discord's JSON error code of a discordgo REST error (0 when
// it has none).
func apiCode(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code
	}
	return 0
}

// classify gives a discordgo error its core kind (and scrubs it).
func (b *Bot) classify(call string, err error) error {
	err = b.scrub(err)
	var rl *discordgo.RateLimitError
	switch s := status(err); {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &rl):
		return &core.Error{Kind: core.KindRateLimited, Msg: "discord " + call + ": rate limited", Err: err, RetryAfter: rl.RetryAfter}
	case s == http.StatusUnauthorized:
		return &core.Error{Kind: core.KindAuth, Msg: "discord " + call + ": 401 (channels.discord.token)", Err: err}
	case s == http.StatusTooManyRequests:
		return &core.Error{Kind: core.KindRateLimited, Msg: "discord " + call + ": rate limited", Err: err}
	case s == http.StatusForbidden && apiCode(err) == discordgo.ErrCodeMissingAccess:
		return &core.Error{Kind: core.KindBadRequest, Msg: "discord " + call + ": Missing Access (50001): the bot cannot see this channel; give its role View Channel and Read Message History there (server or channel settings → Permissions)", Err: err}
	case s == http.StatusForbidden && apiCode(err) == discordgo.ErrCodeMissingPermissions:
		return &core.Error{Kind: core.KindBadRequest, Msg: "discord " + call + ": Missing Permissions (50013): give the bot's role Send Messages, Send Messages in Threads, Add Reactions and Attach Files in this channel, or invite it again with the README's link", Err: err}
	case s == http.StatusForbidden && apiCode(err) == discordgo.ErrCodeCannotSendMessagesToThisUser,
		s == http.StatusNotFound && apiCode(err) == discordgo.ErrCodeUnknownChannel:
		// The user closed their DMs to the bot, or the channel was
		// deleted: the chat takes no more messages.
		return &core.Error{Kind: core.KindBadRequest, Msg: "discord " + call + " refused", Err: fmt.Errorf("%w: %w", core.ErrRecipientGone, err)}
	case s >= 400 && s < 500:
		return &core.Error{Kind: core.KindBadRequest, Msg: "discord " + call + " refused", Err: err}
	}
	return &core.Error{Kind: core.KindUnavailable, Msg: "discord " + call + " failed", Err: err}
}

// Working implements core.Indicator: the typing indicator every few
// seconds and the ack reaction on the user's message until stop is
// called. An application command shows Discord's own "thinking" instead.
func (b *Bot) Working(ctx context.Context, in core.Inbound) (stop func()) {
	if in.Meta[metaInteraction] != "" {
		return func() {}
	}
	ch := target(in.Conversation)
	o := toolkit.WorkingOptions{
		Every: b.o.TypingEvery,
		Typing: func(ctx context.Context) {
			if err := b.rest.ChannelTyping(ch, discordgo.WithContext(ctx)); err != nil && ctx.Err() == nil {
				b.log.Debug("typing indicator failed", "channel", ch, "err", b.scrub(err))
			}
		},
	}
	if emoji := b.cfg.AckReaction; emoji != "" && in.MessageID != "" && b.claimReactions(ch) {
		done := make(chan struct{})
		var once sync.Once
		o.Ack = func(ctx context.Context) {
			b.background.Add(1)
			go func() {
				defer b.background.Done()
				defer b.releaseReactions(ch)
				b.ackReaction(ctx, ch, in.MessageID, emoji, done)
			}()
		}
		o.Unack = func(context.Context) { once.Do(func() { close(done) }) }
	}
	return b.typing.Working(ctx, ch, o)
}

// claimReactions reserves channel ch for one ack reaction at a time:
// Discord allows about one reaction call per channel every 250ms, so in
// a busy channel only one message at a time carries the ack reaction
// (the typing indicator still shows for all) instead of reaction calls
// piling up behind the limit.
func (b *Bot) claimReactions(ch string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reacting[ch] {
		return false
	}
	b.reacting[ch] = true
	return true
}

func (b *Bot) releaseReactions(ch string) {
	b.mu.Lock()
	delete(b.reacting, ch)
	b.mu.Unlock()
}

// ackReaction puts emoji on the user's message, waits until the work is
// done and takes it back. It runs beside the work: discordgo waits for
// the reaction limit without a context, so neither the reply nor the
// conversation's next message waits for the reaction. Work done before
// the reaction could go out shows none.
func (b *Bot) ackReaction(ctx context.Context, ch, msg, emoji string, done <-chan struct{}) {
	call := func(f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unackTimeout)
		defer cancel()
		return f(cctx)
	}
	select {
	case <-done:
		return
	default:
	}
	if err := call(func(ctx context.Context) error {
		return b.rest.MessageReactionAdd(ch, msg, emoji, discordgo.WithContext(ctx))
	}); err != nil {
		b.ackFailed(ch, emoji, err)
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	if err := call(func(ctx context.Context) error {
		return b.rest.MessageReactionRemove(ch, msg, emoji, "@me", discordgo.WithContext(ctx))
	}); err != nil {
		b.log.Debug("removing the ack reaction failed", "channel", ch, "err", b.scrub(err))
	}
}

// ackFailed logs an ack reaction Discord refused. A refusal that will
// recur (no Add Reactions or Read Message History permission, an emoji
// Discord does not know) is a warning once per process, naming the fix;
// anything else is logged at debug level.
func (b *Bot) ackFailed(ch, emoji string, err error) {
	err = b.scrub(err)
	var hint string
	switch apiCode(err) {
	case discordgo.ErrCodeMissingPermissions, discordgo.ErrCodeMissingAccess:
		hint = "give the bot's role Add Reactions and Read Message History in this channel, or set channels.discord.ack_reaction: \"\" for none"
	case discordgo.ErrCodeUnknownEmoji:
		hint = "set channels.discord.ack_reaction to a Unicode emoji (or name:id of a custom one the bot can use), or \"\" for none"
	}
	b.mu.Lock()
	warn := hint != "" && !b.ackWarned
	if warn {
		b.ackWarned = true
	}
	b.mu.Unlock()
	if !warn {
		b.log.Debug("ack reaction failed", "channel", ch, "err", err)
		return
	}
	b.log.Warn("Discord refused the ack reaction; messages are answered without it", "ack_reaction", emoji, "channel", ch, "err", err, "fix", hint)
}
