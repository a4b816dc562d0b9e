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

var (
	_ core.Streamer       = (*Bot)(nil)
	_ core.NativeStreamer = (*Bot)(nil)
	_ core.Deleter        = (*Bot)(nil)
)

// editInterval is the least time between two edits of a streamed
// message: Telegram allows about one per second per chat (the per-chat
// pacing and the limit across chats still apply to every call).
const editInterval = time.Second

// Streaming implements core.Streamer: channels.telegram.streaming, native
// (drafts) in private chats only.
func (b *Bot) Streaming(to core.Outbound) core.StreamPolicy {
	private := to.Meta["chat_type"] == string(models.ChatTypePrivate)
	return toolkit.StreamPolicy(b.cfg.Streaming, private, editInterval)
}

// Draft implements core.Streamer.
func (b *Bot) Draft(text string) []core.DraftPart {
	return textfmt.Draft(text, MaxMessage, textfmt.ToTelegramHTML, visibleLen)
}

// visibleLen measures a part the way Telegram's limit does: the text the
// HTML shows, not its tags.
func visibleLen(html string) int { return textfmt.Len(textfmt.HTMLToPlain(html)) }

// Edit implements core.Streamer with editMessageText. Telegram refusing
// an edit to the text the message already shows is no error.
func (b *Bot) Edit(ctx context.Context, to core.Outbound, id, part string) error {
	chat, msg, ok := parsePlatformID(id)
	if !ok {
		return core.Errorf(core.KindInvalid, "telegram: %q is not a message id of this channel", id)
	}
	group := to.Meta["chat_type"] != "" && to.Meta["chat_type"] != string(models.ChatTypePrivate)
	p := &tgbot.EditMessageTextParams{ChatID: chat, MessageID: msg, Text: part, ParseMode: models.ParseModeHTML}
	return b.call(ctx, to.Conversation.Chat, group, "editMessageText", func(ctx context.Context) error {
		_, err := b.api.EditMessageText(ctx, p)
		if err != nil && cannotParse(err) && p.ParseMode != "" {
			p.Text, p.ParseMode = textfmt.HTMLToPlain(part), ""
			_, err = b.api.EditMessageText(ctx, p)
		}
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "message is not modified") {
			return nil
		}
		return err
	})
}

// Delete implements core.Deleter.
func (b *Bot) Delete(ctx context.Context, to core.Outbound, id string) error {
	chat, msg, ok := parsePlatformID(id)
	if !ok {
		return core.Errorf(core.KindInvalid, "telegram: %q is not a message id of this channel", id)
	}
	return b.call(ctx, to.Conversation.Chat, false, "deleteMessage", func(ctx context.Context) error {
		_, err := b.api.DeleteMessage(ctx, &tgbot.DeleteMessageParams{ChatID: chat, MessageID: msg})
		return err
	})
}

// ShowDraft implements core.NativeStreamer with sendMessageDraft: the
// draft is no message, so it returns "". A message the stream sent
// before (d.ID, after a restart) is edited instead. Telegram refusing
// drafts here makes the stream edit a message.
func (b *Bot) ShowDraft(ctx context.Context, to core.Outbound, d core.NativeDraft) (string, error) {
	if d.ID != "" {
		return d.ID, b.Edit(ctx, to, d.ID, d.Part)
	}
	chat, err := strconv.ParseInt(to.Conversation.Chat, 10, 64)
	if err != nil {
		return "", core.Errorf(core.KindInvalid, "telegram: conversation %s has no numeric chat id", to.Conversation)
	}
	p := &tgbot.SendMessageDraftParams{ChatID: chat, DraftID: strconv.FormatInt(d.Key*16+int64(d.Seq)+1, 10), Text: d.Part, ParseMode: models.ParseModeHTML}
	if to.Conversation.Thread != "" {
		p.MessageThreadID, _ = strconv.Atoi(to.Conversation.Thread)
	}
	err = b.call(ctx, to.Conversation.Chat, false, "sendMessageDraft", func(ctx context.Context) error {
		_, err := b.api.SendMessageDraft(ctx, p)
		return err
	})
	if err != nil && core.ErrorKind(err) == core.KindBadRequest {
		return "", errors.Join(core.ErrNoNativeStream, err)
	}
	return "", err
}

// EndDraft implements core.NativeStreamer: the filled draft is sent as a
// message (or the message sent before is edited).
func (b *Bot) EndDraft(ctx context.Context, to core.Outbound, d core.NativeDraft, part string) (string, error) {
	if d.ID != "" {
		return d.ID, b.Edit(ctx, to, d.ID, part)
	}
	return b.Send(ctx, to, part)
}

// call makes one paced Bot API call, waiting out 429s like Send.
func (b *Bot) call(ctx context.Context, chat string, group bool, method string, fn func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		if err := b.pace.Wait(ctx, chat, group, false); err != nil {
			return err
		}
		err := fn(ctx)
		if err == nil {
			return nil
		}
		err = b.classify(method, err)
		var tm *tgbot.TooManyRequestsError
		if errors.As(err, &tm) && attempt < maxRateRetries {
			if err := b.sleep(ctx, time.Duration(max(tm.RetryAfter, 1))*time.Second); err != nil {
				return err
			}
			continue
		}
		return err
	}
}
