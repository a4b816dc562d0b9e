package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// handle turns one update into a call on sink. A nil error means the
// update is done with (committed, or deliberately ignored) and the offset
// may move past it.
func (b *Bot) handle(ctx context.Context, sink core.Sink, u *models.Update) error {
	b.health.Event()
	b.log.Debug("update received", "update_id", u.ID)
	switch {
	case u.Message != nil:
		in, ok := b.inbound(u.Message, sink)
		if !ok {
			return nil
		}
		in = withForward(u.Message, b.withReplyContext(ctx, sink, u.Message, in))
		if err := sink.Accept(ctx, in); err != nil {
			return fmt.Errorf("update %d: %w", u.ID, err)
		}
	case u.EditedMessage != nil:
		if in, ok := b.merged.edited(u.EditedMessage, func() string { return b.partText(u.EditedMessage, sink) }); ok {
			// A part of a paste handed over as one message: the queued
			// message is the whole paste with this part's new text.
			replaced, err := sink.Edit(ctx, in)
			if err != nil {
				return fmt.Errorf("update %d (edit of a paste's part): %w", u.ID, err)
			}
			b.log.Debug("edited part of a paste", "message", in.MessageID, "replaced_queued_text", replaced)
			return nil
		}
		in, ok := b.inbound(u.EditedMessage, sink)
		if !ok {
			return nil
		}
		replaced, err := sink.Edit(ctx, in)
		if err != nil {
			return fmt.Errorf("update %d (edit): %w", u.ID, err)
		}
		b.log.Debug("edited message", "message", in.MessageID, "replaced_queued_text", replaced)
	case u.MessageReaction != nil:
		for _, r := range b.reactionEvents(u.MessageReaction) {
			if err := sink.React(ctx, r); err != nil {
				return fmt.Errorf("update %d (reaction): %w", u.ID, err)
			}
		}
	case u.CallbackQuery != nil:
		b.answerCallback(ctx, u.CallbackQuery)
	default:
		b.log.Debug("update ignored", "update_id", u.ID)
	}
	return nil
}

// answerCallback answers a button press so the user's client stops
// showing its progress spinner (Telegram keeps it for about 15 seconds
// otherwise). The gateway sends no buttons of its own, so a press is a
// leftover of another program's message on this token: it is answered
// empty and goes no further. The answer is best-effort; a refusal (the
// press is older than Telegram keeps it) changes nothing for the user.
func (b *Bot) answerCallback(ctx context.Context, q *models.CallbackQuery) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := b.api.AnswerCallbackQuery(ctx, &tgbot.AnswerCallbackQueryParams{CallbackQueryID: q.ID}); err != nil {
		b.log.Debug("callback query not answered", "err", b.scrub(err))
	}
}

// inbound normalizes a message; ok=false means it is not for the bot.
// sink tells which commands core answers (core.CommandKnower): in a
// group a bare command it does not know is another bot's.
func (b *Bot) inbound(m *models.Message, sink core.Sink) (core.Inbound, bool) {
	me := b.botUser()
	from, ok := author(m, me.ID)
	if !ok {
		return core.Inbound{}, false // channel posts, other bots, ourselves
	}
	text := m.Text
	ents := m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	fs := files(m)
	if strings.TrimSpace(text) == "" && len(fs) == 0 {
		return core.Inbound{}, false
	}
	if !b.allowed(from, m.Chat.ID) {
		b.log.Debug("message from a user or chat not in allow_users/allow_chats ignored", "chat", m.Chat.ID, "user", from.ID)
		return core.Inbound{}, false
	}
	chat := strconv.FormatInt(m.Chat.ID, 10)
	in := core.Inbound{
		Conversation: core.ConversationKey{Channel: Name, Chat: chat},
		MessageID:    platformID(m.Chat.ID, m.ID),
		UserID:       strconv.FormatInt(from.ID, 10),
		UserName:     displayName(from),
		Meta:         map[string]string{"chat_type": string(m.Chat.Type)},
		Files:        fs,
		ReceivedAt:   time.Unix(int64(m.Date), 0),
	}
	if m.ReplyToMessage != nil {
		in.ReplyTo = platformID(m.Chat.ID, m.ReplyToMessage.ID)
	}
	// A forward's command was its author's, for whichever bot: it is
	// quoted (withForward), never dropped as another bot's command.
	forward := m.ForwardOrigin != nil
	if inTopic(m) {
		// A forum topic, or a topic of a private chat with a bot whose
		// threaded mode is on: each its own conversation, answered there.
		in.Conversation.Thread = strconv.Itoa(m.MessageThreadID)
	}
	if m.Chat.Type == models.ChatTypePrivate {
		in.Private, in.Mentioned = true, true
		if forward {
			in.Text = strings.TrimSpace(text) // its author's words, as written
			return in, true
		}
		in.Text = stripCommandSuffix(text)
		if cmdForOtherBot(text, ents, me.Username) {
			return core.Inbound{}, false
		}
		return in, true
	}
	if !forward && cmdForOtherBot(text, ents, me.Username) {
		return core.Inbound{}, false
	}
	addr := toolkit.Addressing{
		Mentioned:  hasMention(text, ents, me),
		ReplyToBot: m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == me.ID,
		Command:    isCommand(text, ents),
	}
	if forward {
		// A forward's mentions and commands were its author's: it
		// addresses no one here (withForward quotes it).
		addr.Mentioned, addr.Command = false, false
	}
	if cmd := leadingCommand(text, ents); addr.Command {
		switch _, _, ok := core.ParseCommand(cmd); {
		case !ok:
			// Telegram marks "/2" a command; core reads it as text
			// ("/2 cups of flour?"): it addresses no one, and is no other
			// bot's command to leave alone either (trigger: all answers it).
			addr.Command = false
		case !commandForUs(cmd, sink):
			// Telegram hands every bot of a group the bare commands
			// typed there: one the bot does not have is another bot's,
			// not for an "Unknown command" answer, unless the message
			// names or replies to the bot.
			if !addr.Mentioned && !addr.ReplyToBot {
				return core.Inbound{}, false
			}
			addr.Command = false
		}
	}
	in.Mentioned = addr.Addressed()
	if !b.trigger.Admits(addr) {
		return core.Inbound{}, false
	}
	if forward {
		in.Text = strings.TrimSpace(text) // its author's words, as written
		return in, true
	}
	in.Text = stripCommandSuffix(stripMention(text, me.Username))
	if strings.TrimSpace(in.Text) == "" && len(fs) == 0 {
		in.Text = text // only a mention: keep it rather than send nothing
	}
	return in, true
}

// author is who wrote m as the bot answers and allows them. A person
// writing as an anonymous admin of a group, or as a channel, is hidden by
// Telegram: from is a placeholder bot and sender_chat names the group or
// channel, which is then the author (its id for allow_users, its title as
// the name). So is a channel for its post copied into its discussion
// group (from is the Telegram service account there). ok is false for
// what the bot does not answer: channel posts (no from), other bots and
// the bot itself.
func author(m *models.Message, me int64) (from *models.User, ok bool) {
	switch {
	case m.From == nil:
		return nil, false
	case m.SenderChat != nil:
		c := m.SenderChat
		return &models.User{ID: c.ID, Username: c.Username, FirstName: c.Title}, true
	case m.From.IsBot || m.From.ID == me:
		return nil, false
	}
	return m.From, true
}

func displayName(u *models.User) string {
	if u.Username != "" {
		return "@" + u.Username
	}
	return strings.TrimSpace(u.FirstName + " " + u.LastName)
}

// allowed applies allow_users (ids or @usernames) and allow_chats.
func (b *Bot) allowed(u *models.User, chat int64) bool {
	return b.users.Allows(strconv.FormatInt(u.ID, 10), u.Username) && b.chats.AllowsAny(strconv.FormatInt(chat, 10))
}

// entityText returns the text an entity covers (offsets are UTF-16).
func entityText(text string, e models.MessageEntity) string {
	u := utf16.Encode([]rune(text))
	if e.Offset < 0 || e.Offset+e.Length > len(u) {
		return ""
	}
	return string(utf16.Decode(u[e.Offset : e.Offset+e.Length]))
}

func hasMention(text string, ents []models.MessageEntity, me models.User) bool {
	for _, e := range ents {
		switch e.Type {
		case models.MessageEntityTypeMention:
			if me.Username != "" && strings.EqualFold(entityText(text, e), "@"+me.Username) {
				return true
			}
		case models.MessageEntityTypeTextMention:
			if e.User != nil && e.User.ID == me.ID {
				return true
			}
		}
	}
	// Entities are missing in some clients' edits: fall back to the text.
	return me.Username != "" && containsMention(text, me.Username)
}

// containsMention finds "@username" not followed by more name characters.
func containsMention(text, username string) bool {
	lower, at := strings.ToLower(text), "@"+strings.ToLower(username)
	for i := 0; ; {
		j := strings.Index(lower[i:], at)
		if j < 0 {
			return false
		}
		end := i + j + len(at)
		if end >= len(lower) || !isNameByte(lower[end]) {
			return true
		}
		i = end
	}
}

// leadingCommand returns the "/cmd[@bot]" token a message starts with.
func leadingCommand(text string, ents []models.MessageEntity) string {
	for _, e := range ents {
		if e.Type == models.MessageEntityTypeBotCommand && e.Offset == 0 {
			return entityText(text, e)
		}
	}
	if strings.HasPrefix(text, "/") {
		tok, _, _ := strings.Cut(text, " ")
		tok, _, _ = strings.Cut(tok, "\n")
		if _, _, ok := core.ParseCommand(tok); ok {
			return tok
		}
	}
	return ""
}

func isCommand(text string, ents []models.MessageEntity) bool {
	return leadingCommand(text, ents) != ""
}

// cmdForOtherBot reports "/cmd@otherbot": a command meant for another bot.
func cmdForOtherBot(text string, ents []models.MessageEntity, username string) bool {
	cmd := leadingCommand(text, ents)
	_, target, found := strings.Cut(cmd, "@")
	return found && !strings.EqualFold(target, username)
}

// commandForUs says a message's leading "/cmd[@bot]" (cmdForOtherBot
// has refused another bot's suffix) is for the bot: it names the bot, or
// core answers it; true when the sink cannot tell.
func commandForUs(cmd string, sink core.Sink) bool {
	if strings.Contains(cmd, "@") {
		return true
	}
	k, ok := sink.(core.CommandKnower)
	if !ok {
		return true
	}
	name, _, _ := core.ParseCommand(cmd)
	return k.KnowsCommand(name)
}

// inTopic says m was written in a forum topic, its own conversation (or
// in a topic of a private chat, which a bot with threaded mode on has).
// Telegram marks a topic's messages is_topic_message. A message_thread_id
// alone is a topic only in a forum, and only when m is no reply to an
// ordinary message: a reply in the General topic, or anywhere outside a
// forum, carries the id of its reply chain instead. (A topic's messages
// that are no reply to another one reply to the topic's creation.)
func inTopic(m *models.Message) bool {
	if m.MessageThreadID == 0 {
		return false
	}
	if m.IsTopicMessage {
		return true
	}
	return m.Chat.IsForum && (m.ReplyToMessage == nil || m.ReplyToMessage.ForumTopicCreated != nil)
}

// stripCommandSuffix turns "/cmd@bot args" into "/cmd args" for core.
func stripCommandSuffix(text string) string {
	text = strings.TrimSpace(text)
	cmd := leadingCommand(text, nil)
	name, _, found := strings.Cut(cmd, "@")
	if !found || !strings.HasPrefix(text, cmd) {
		return text
	}
	return name + text[len(cmd):]
}

// stripMention removes "@bot" from the text (any case) and tidies spaces.
func stripMention(text, username string) string {
	if username == "" {
		return text
	}
	at := "@" + strings.ToLower(username)
	lower := strings.ToLower(text)
	var b strings.Builder
	for {
		i := strings.Index(lower, at)
		if i < 0 {
			b.WriteString(text)
			break
		}
		end := i + len(at)
		// "/cmd@bot" keeps its suffix here; stripCommandSuffix handles it.
		if i > 0 && text[i-1] != ' ' && text[i-1] != '\n' && text[i-1] != '(' {
			b.WriteString(text[:end])
		} else if end < len(text) && isNameByte(text[end]) {
			b.WriteString(text[:end]) // "@bot_fan" is someone else
		} else {
			b.WriteString(text[:i])
			if end < len(text) && (text[end] == ',' || text[end] == ':') {
				end++
			}
			if end < len(text) && text[end] == ' ' && (i == 0 || text[i-1] == ' ') {
				end++
			}
		}
		text, lower = text[end:], lower[end:]
	}
	return strings.TrimSpace(b.String())
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// reactionEvents turns a message_reaction update into the added and
// removed emoji that carry a polarity.
func (b *Bot) reactionEvents(r *models.MessageReactionUpdated) []core.Reaction {
	if r.User == nil || r.User.IsBot {
		return nil // anonymous admins and bots do not rate answers
	}
	if !b.allowed(r.User, r.Chat.ID) {
		return nil
	}
	emojis := func(rs []models.ReactionType) []string {
		var out []string
		for _, x := range rs {
			if x.ReactionTypeEmoji != nil {
				out = append(out, x.ReactionTypeEmoji.Emoji)
			}
		}
		return out
	}
	msg := platformID(r.Chat.ID, r.MessageID)
	user := strconv.FormatInt(r.User.ID, 10)
	base := core.Reaction{
		Conversation: core.ConversationKey{Channel: Name, Chat: strconv.FormatInt(r.Chat.ID, 10)},
		EventID:      fmt.Sprintf("%s:%s:%d", msg, user, r.Date),
		MessageID:    msg,
		UserID:       user,
		At:           time.Unix(int64(r.Date), 0),
	}
	return b.reactions.Events(base, emojis(r.OldReaction), emojis(r.NewReaction))
}
