package slack

import (
	"context"
	"fmt"
	"strings"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// Meta keys an Inbound carries to its reply.
const (
	// metaReplyTS is the thread the reply goes to ("" = not in a thread).
	metaReplyTS = "reply_ts"
	// metaChannelType is Slack's channel_type (im, channel, group, mpim).
	metaChannelType = "channel_type"
	// metaKind is "slash" for a slash command, answered ephemerally.
	metaKind = "kind"
	// metaUser is the user a slash command's answer is shown to.
	metaUser = "user"
)

const kindSlash = "slash"

// message is what app_mention and message events have in common.
type message struct {
	channel, channelType string
	user, botID          string
	text                 string
	ts, threadTS         string
	// mention: an app_mention event (the bot is mentioned).
	mention bool
	// files are the files the message shares.
	files []core.InboundFile
}

// private says whether m is in a DM (an app_mention names no
// channel_type: a DM channel's id starts with D).
func (m message) private() bool {
	return m.channelType == "im" || (m.channelType == "" && strings.HasPrefix(m.channel, "D"))
}

// handleEvent turns one Events API event into a call on sink. A nil
// error means the event is done with (committed, or deliberately
// ignored) and may be acknowledged.
func (b *Bot) handleEvent(ctx context.Context, sink core.Sink, eventID string, inner slackevents.EventsAPIInnerEvent) error {
	switch ev := inner.Data.(type) {
	case *slackevents.AppMentionEvent:
		m := message{channel: ev.Channel, user: ev.User, botID: ev.BotID,
			text: ev.Text, ts: ev.TimeStamp, threadTS: ev.ThreadTimeStamp, mention: true, files: inboundFiles(ev.Files)}
		if ev.Edited != nil {
			return b.edit(ctx, sink, m)
		}
		return b.accept(ctx, sink, m)
	case *slackevents.MessageEvent:
		if ev.SubType == "message_changed" {
			if n := ev.Message; n != nil && userSubtype(n.SubType) {
				return b.edit(ctx, sink, message{channel: ev.Channel, channelType: ev.ChannelType, user: n.User, botID: n.BotID,
					text: n.Text, ts: n.Timestamp, threadTS: n.ThreadTimestamp, files: inboundFiles(n.Files)})
			}
			return nil
		}
		if !userSubtype(ev.SubType) {
			b.log.Debug("message subtype ignored", "subtype", ev.SubType)
			return nil
		}
		m := message{channel: ev.Channel, channelType: ev.ChannelType, user: ev.User, botID: ev.BotID,
			text: ev.Text, ts: ev.TimeStamp, threadTS: ev.ThreadTimeStamp}
		if ev.Message != nil {
			m.files = inboundFiles(ev.Message.Files)
		}
		return b.accept(ctx, sink, m)
	case *slackevents.ReactionAddedEvent:
		return b.react(ctx, sink, eventID, ev.User, ev.Reaction, ev.ItemUser, ev.Item, ev.EventTimestamp, true)
	case *slackevents.ReactionRemovedEvent:
		return b.react(ctx, sink, eventID, ev.User, ev.Reaction, ev.ItemUser, ev.Item, ev.EventTimestamp, false)
	default:
		b.log.Debug("event ignored", "type", inner.Type)
	}
	return nil
}

// userSubtype says whether a message of this subtype is a user writing:
// ordinary messages, file shares and thread replies also sent to the
// channel; every other subtype (edits, joins, bot messages, ...) is not.
func userSubtype(subtype string) bool {
	return subtype == "" || subtype == "file_share" || subtype == "thread_broadcast"
}

// edit hands an edited message to the sink: a message still queued gets
// the new text, as on Telegram and Discord; one already answered is not
// answered again. Slack sends the edit of a message that mentions the bot
// in a channel twice: as message_changed, which inbound leaves to the
// other, and as an app_mention of the same ts with "edited". Such an
// app_mention the sink did not take as an edit is accepted: a message
// edited to mention the bot is answered, and the same message accepted
// before is a duplicate for the sink (same message id). The thread's
// earlier messages quoted with a message in a channel's thread are its
// Context, which the edit leaves as it was queued.
func (b *Bot) edit(ctx context.Context, sink core.Sink, m message) error {
	private := m.private()
	channelThread := !private && m.threadTS != "" && m.threadTS != m.ts
	if channelThread && !m.mention {
		return nil // nothing to do, and no thread to look up
	}
	in, ok := b.inbound(ctx, m, b.mayTalk(sink, m.channel))
	if !ok {
		return nil
	}
	replaced, err := sink.Edit(ctx, in)
	if err != nil {
		return fmt.Errorf("edit of message %s: %w", in.MessageID, err)
	}
	b.log.Debug("edited message", "message", in.MessageID, "replaced_queued_text", replaced)
	if replaced {
		return nil
	}
	if !m.mention {
		return nil
	}
	if err := sink.Accept(ctx, in); err != nil {
		return fmt.Errorf("message %s: %w", in.MessageID, err)
	}
	return nil
}

func (b *Bot) accept(ctx context.Context, sink core.Sink, m message) error {
	in, ok := b.inbound(ctx, m, b.mayTalk(sink, m.channel))
	if !ok {
		return nil
	}
	if err := sink.Accept(ctx, in); err != nil {
		return fmt.Errorf("message %s: %w", in.MessageID, err)
	}
	return nil
}

// mayTalk says whether a user of a channel may talk to the bot: the
// channel's allow_users and, when the sink can tell, the gateway's access
// rule (its modes, admins, pairings, auth provider).
func (b *Bot) mayTalk(sink core.Sink, channel string) func(ctx context.Context, user string) bool {
	ac, _ := sink.(core.AccessChecker)
	return func(ctx context.Context, user string) bool {
		if user == "" || !b.users.Allows(user, "") {
			return false
		}
		return ac == nil || ac.MayTalk(ctx, core.Inbound{Conversation: core.ConversationKey{Channel: Name, Chat: channel}, UserID: user})
	}
}

// inbound normalizes a message; ok=false means it is not for the bot.
// mayTalk judges the authors of a thread's earlier messages.
func (b *Bot) inbound(ctx context.Context, m message, mayTalk func(context.Context, string) bool) (core.Inbound, bool) {
	me := b.identity()
	if m.user == "" || m.user == me.UserID || (me.BotID != "" && m.botID == me.BotID) || strings.TrimSpace(m.text) == "" && len(m.files) == 0 {
		return core.Inbound{}, false // ourselves, an app without a user, nothing to answer
	}
	if m.botID != "" && !b.profile(ctx, m.user).person {
		// Another app's bot user. A message with a bot_id and a person
		// as its user is that person's, posted through an app with
		// their own token (a custom front end, a bridge): Slack stamps
		// it with the app's bot_id.
		return core.Inbound{}, false
	}
	if !b.users.Allows(m.user, "") || !b.chats.AllowsAny(m.channel) {
		b.log.Debug("message from a user or channel not in allow_users/allow_chats ignored", "channel", m.channel, "user", m.user)
		return core.Inbound{}, false
	}
	private := m.private()
	inThread := m.threadTS != "" && m.threadTS != m.ts
	mentioned := m.mention || (private && mentions(m.text, me.UserID))
	if !private && !m.mention && mentions(m.text, me.UserID) {
		return core.Inbound{}, false // its app_mention event answers it
	}
	addr := toolkit.Addressing{Private: private, Mentioned: mentioned}
	var thread []slack.Message // the thread's earlier messages, when fetched
	if !private && !mentioned && inThread && b.cfg.Trigger != config.TriggerAll {
		addr.ReplyToBot, thread = b.botInThread(ctx, m.channel, m.threadTS, m.ts)
	}
	if !b.trigger.Admits(addr) {
		return core.Inbound{}, false
	}
	resolve := func(id string) string { return b.userName(ctx, id) }
	text := strings.TrimSpace(textfmt.FromSlack(stripMention(m.text, me.UserID), resolve))
	if text == "" && len(m.files) == 0 {
		text = textfmt.FromSlack(m.text, resolve) // only a mention: keep it rather than send nothing
	}
	conv := core.ConversationKey{Channel: Name, Chat: m.channel}
	replyTS := ""
	switch {
	case private && b.cfg.ReplyInThread == config.ReplyInThreadAlways:
		replyTS = first(m.threadTS, m.ts)
	case private && b.cfg.ReplyInThread == config.ReplyInThreadAuto && inThread:
		replyTS = m.threadTS
	case !private && b.cfg.ReplyInThread != config.ReplyInThreadNever:
		conv.Thread = first(m.threadTS, m.ts)
		replyTS = conv.Thread
	}
	quoted := "" // the thread's earlier messages, for the LLM
	if !private {
		if inThread {
			if _, _, isCmd := core.ParseCommand(text); !isCmd {
				quoted = b.threadContext(ctx, m, thread, mayTalk)
			}
		} else {
			b.seen.Add(threadKey(m.channel, m.ts)) // the bot sees this thread from its start
		}
	}
	channelType := m.channelType
	if channelType == "" && private {
		channelType = "im"
	}
	return core.Inbound{
		Conversation: conv,
		MessageID:    platformID(m.channel, m.ts),
		UserID:       m.user,
		UserName:     displayName(b.userName(ctx, m.user), m.user),
		Text:         text,
		Context:      quoted,
		Mentioned:    addr.Addressed(),
		Private:      private,
		Meta:         map[string]string{metaReplyTS: replyTS, metaChannelType: channelType, metaUser: m.user},
		Files:        m.files,
		ReceivedAt:   parseTS(m.ts),
	}, true
}

// react turns a reaction on one of the bot's messages into core.Reaction
// events; reactions on other messages, emoji that are no signal and
// reactions of bot users (users.info says so) are ignored.
func (b *Bot) react(ctx context.Context, sink core.Sink, eventID, user, name, itemUser string, item slackevents.Item, eventTS string, added bool) error {
	me := b.identity()
	if item.Type != "message" || user == "" || user == me.UserID || (itemUser != "" && itemUser != me.UserID) {
		return nil
	}
	if !b.users.Allows(user, "") || !b.chats.AllowsAny(item.Channel) {
		return nil
	}
	if _, signal := b.reactions.Polarity(name); !signal || b.profile(ctx, user).bot {
		return nil // no signal, or another app's bot rating the answer
	}
	msg := platformID(item.Channel, item.Timestamp)
	if eventID == "" {
		eventID = fmt.Sprintf("%s:%s:%s", msg, user, eventTS)
	}
	base := core.Reaction{
		Conversation: core.ConversationKey{Channel: Name, Chat: item.Channel},
		EventID:      eventID,
		MessageID:    msg,
		UserID:       user,
		At:           parseTS(eventTS),
	}
	r, ok := b.reactions.Event(base, name, added)
	if !ok {
		return nil
	}
	if err := sink.React(ctx, r); err != nil {
		return fmt.Errorf("reaction %s on %s: %w", name, msg, err)
	}
	return nil
}

// answerCommands are the slash commands whose answer is an answer of the
// conversation, not a notice for the one user: /retry's re-answer is
// posted like any reply, so it stays, and reactions on it teach the
// router.
var answerCommands = map[string]bool{"/retry": true}

// handleSlash hands a slash command to core as the typed command would
// be: "/model gpt" in the conversation it is about. Its answer is
// ephemeral, but for answerCommands. Slack gives a slash command its
// channel, never a thread; in a channel whose conversations are threads
// (reply_in_thread other than never) it is about the thread where the bot
// last answered this user (slashThread), so /retry retries that answer
// and /status, /new and /model are that conversation's; before any, the
// channel's top level, whose /model pin the channel's new threads start
// with. In a DM it is the DM's. A command from outside allow_users or
// allow_chats is not handed on: refusal is what its acknowledgement
// answers at once (only its user sees it).
func (b *Bot) handleSlash(ctx context.Context, sink core.Sink, cmd slack.SlashCommand, envelopeID string) (refusal string, err error) {
	if cmd.UserID == "" || cmd.ChannelID == "" || !strings.HasPrefix(cmd.Command, "/") {
		b.log.Warn("slash command without a user, a channel or a command dropped", "command", cmd.Command)
		return "", nil
	}
	if !b.users.Allows(cmd.UserID, "") || !b.chats.AllowsAny(cmd.ChannelID) {
		b.log.Debug("slash command from a user or channel not in allow_users/allow_chats refused", "channel", cmd.ChannelID, "user", cmd.UserID)
		return notAnswered, nil
	}
	id := first(cmd.TriggerID, envelopeID)
	if id == "" {
		id = fmt.Sprintf("%s:%s:%d", cmd.ChannelID, cmd.UserID, b.now().UnixNano())
	}
	private := strings.HasPrefix(cmd.ChannelID, "D") || cmd.ChannelName == "directmessage"
	conv := core.ConversationKey{Channel: Name, Chat: cmd.ChannelID}
	if !private && b.cfg.ReplyInThread != config.ReplyInThreadNever {
		conv.Thread = b.slashThread(ctx, conv, cmd.UserID)
	}
	in := core.Inbound{
		Conversation: conv,
		MessageID:    "cmd:" + id,
		UserID:       cmd.UserID,
		UserName:     displayName(b.userName(ctx, cmd.UserID), cmd.UserName),
		Text:         strings.TrimSpace(strings.ToLower(cmd.Command) + " " + textfmt.FromSlack(cmd.Text, func(id string) string { return b.userName(ctx, id) })),
		Mentioned:    true,
		Private:      private,
		Meta:         map[string]string{metaKind: kindSlash, metaUser: cmd.UserID},
		ReceivedAt:   b.now(),
	}
	if answerCommands[strings.ToLower(cmd.Command)] {
		delete(in.Meta, metaKind)
	} else {
		in.Ephemeral = true
	}
	if cmd.ResponseURL != "" {
		b.rememberResponse(ctx, in.MessageID, cmd.ResponseURL)
	}
	if err := sink.Accept(ctx, in); err != nil {
		return "", fmt.Errorf("slash command %s: %w", cmd.Command, err)
	}
	return "", nil
}

// notAnswered answers a slash command of someone the bot does not answer
// here, as the gateway answers one its access rules refuse.
const notAnswered = "This bot does not answer you here."

// ephemeralPayload is a slash command's immediate answer, only its user
// sees it (an acknowledgement's payload, an HTTP response's body).
func ephemeralPayload(text string) map[string]string {
	return map[string]string{"response_type": "ephemeral", "text": text}
}

// slashThread is the thread of conv's channel where the bot last
// answered user, from the sink's ledger ("" when none, or when the
// ledger cannot tell: the channel's top level).
func (b *Bot) slashThread(ctx context.Context, conv core.ConversationKey, user string) string {
	l := b.threadLedger()
	if l == nil {
		return ""
	}
	thread, err := l.LatestThread(ctx, conv, user)
	if err != nil {
		b.log.Warn("cannot tell which thread a slash command is about; it goes to the channel's top level", "channel", conv.Chat, "err", err)
		return ""
	}
	return thread
}
