package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// maxRateRetries bounds how often one part is retried after 429s.
const maxRateRetries = 5

// Send implements core.Channel: it sends one HTML part, quoting the user's
// message on the first part and staying in the forum topic. A 429 is
// waited out (retry_after) and retried; markup Telegram cannot parse is
// resent as plain text. It returns "<chat id>:<message id>".
func (b *Bot) Send(ctx context.Context, to core.Outbound, part string) (string, error) {
	chat, err := strconv.ParseInt(to.Conversation.Chat, 10, 64)
	if err != nil {
		return "", core.Errorf(core.KindInvalid, "telegram: conversation %s has no numeric chat id", to.Conversation)
	}
	p := &tgbot.SendMessageParams{ChatID: chat, Text: part, ParseMode: models.ParseModeHTML}
	if to.Conversation.Thread != "" {
		p.MessageThreadID, _ = strconv.Atoi(to.Conversation.Thread)
	}
	if to.Part == 0 && to.ReplyTo != "" {
		if _, msg, ok := parsePlatformID(to.ReplyTo); ok {
			p.ReplyParameters = &models.ReplyParameters{MessageID: msg, AllowSendingWithoutReply: true}
		}
	}
	group := to.Meta["chat_type"] != "" && to.Meta["chat_type"] != string(models.ChatTypePrivate)
	plain, migrated := false, false
	defer b.typing.Quiet(ctx, typingPlace(to.Conversation))()
	for attempt := 0; ; attempt++ {
		if err := b.pace.Wait(ctx, to.Conversation.Chat, group, to.Notice); err != nil {
			return "", err
		}
		m, err := b.api.SendMessage(ctx, p)
		if err == nil {
			return platformID(chat, m.ID), nil
		}
		// Telegram's own words decide (raw): the classified error's text
		// is scrubbed, and a short webhook secret may be one of them.
		raw := err
		err = b.classify("sendMessage", err)
		var tm *tgbot.TooManyRequestsError
		var mig *tgbot.MigrateError
		switch {
		case !migrated && errors.As(raw, &mig) && mig.MigrateToChatID != 0:
			// The group became a supergroup: Telegram names its new id,
			// where the answer still belongs. It quotes nothing: the
			// supergroup numbers its messages anew, so the old message's
			// id there may be another message, someone else's.
			b.log.Warn("the group became a supergroup; sending to its new chat id (a chat id in channels.telegram.allow_chats or a schedule needs the new one)",
				"chat", chat, "new_chat", mig.MigrateToChatID)
			chat, p.ChatID, p.ReplyParameters, migrated = int64(mig.MigrateToChatID), int64(mig.MigrateToChatID), nil, true
		case errors.As(err, &tm) && attempt < maxRateRetries:
			wait := time.Duration(max(tm.RetryAfter, 1)) * time.Second
			b.log.Warn("Telegram flood control: waiting before resending", "chat", chat, "retry_after", wait)
			if err := b.sleep(ctx, wait); err != nil {
				return "", err
			}
		case !plain && cannotParse(raw):
			b.log.Warn("Telegram rejected the HTML of a reply part; resending it as plain text", "chat", chat, "err", err)
			p.Text, p.ParseMode, plain = textfmt.HTMLToPlain(part), "", true
		case p.MessageThreadID != 0 && topicGone(raw):
			// The topic was deleted: answer in the main chat.
			b.log.Info("the forum topic of the conversation is gone; sending in the chat's General topic", "chat", chat, "topic", p.MessageThreadID)
			p.MessageThreadID = 0
		default:
			return "", err
		}
	}
}

// topicGone says Telegram refused a message to a forum topic that was
// deleted since the user wrote in it; err is the library's error as it
// came (not scrubbed).
func topicGone(err error) bool {
	if !errors.Is(err, tgbot.ErrorBadRequest) {
		return false
	}
	e := strings.ToLower(err.Error())
	return strings.Contains(e, "thread not found") || strings.Contains(e, "topic_deleted")
}

// cannotParse reports Telegram's refusal of a text's HTML; err is the
// library's error as it came (not scrubbed).
func cannotParse(err error) bool {
	return errors.Is(err, tgbot.ErrorBadRequest) && strings.Contains(strings.ToLower(err.Error()), "can't parse entities")
}

// Working implements core.Indicator: typing every few seconds and the
// ack reaction on the user's message until stop is called.
func (b *Bot) Working(ctx context.Context, in core.Inbound) (stop func()) {
	chat, err := strconv.ParseInt(in.Conversation.Chat, 10, 64)
	if err != nil {
		return func() {}
	}
	thread, _ := strconv.Atoi(in.Conversation.Thread)
	o := toolkit.WorkingOptions{
		Every: b.o.TypingEvery,
		Typing: func(ctx context.Context) {
			if _, err := b.api.SendChatAction(ctx, &tgbot.SendChatActionParams{ChatID: chat, MessageThreadID: thread, Action: models.ChatActionTyping}); err != nil && ctx.Err() == nil {
				b.log.Debug("sendChatAction failed", "chat", chat, "err", b.scrub(err))
			}
		},
	}
	if _, msg, ok := parsePlatformID(in.MessageID); ok && b.cfg.AckReaction != "" {
		o.Ack = func(ctx context.Context) { b.react(ctx, chat, msg, b.cfg.AckReaction) }
		o.Unack = func(ctx context.Context) { b.react(ctx, chat, msg, "") }
	}
	return b.typing.Working(ctx, typingPlace(in.Conversation), o)
}

// typingPlace is where a typing indicator shows: a chat, or a topic of it.
func typingPlace(c core.ConversationKey) string { return c.Chat + "/" + c.Thread }

// react sets (emoji != "") or clears the bot's reaction on a message.
func (b *Bot) react(ctx context.Context, chat int64, msg int, emoji string) {
	p := &tgbot.SetMessageReactionParams{ChatID: chat, MessageID: msg, Reaction: []models.ReactionType{}}
	if emoji != "" {
		p.Reaction = []models.ReactionType{{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Type: models.ReactionTypeTypeEmoji, Emoji: emoji}}}
	}
	if _, err := b.api.SetMessageReaction(ctx, p); err != nil && ctx.Err() == nil {
		b.log.Debug("setMessageReaction failed (reactions may be off in this chat)", "chat", chat, "err", b.scrub(err))
	}
}
