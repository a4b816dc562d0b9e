package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
)

var (
	alice = telegramtest.User(42, "alice")
	bob   = telegramtest.User(43, "")
)

const groupID = -100777

func TestPrivateMessageAcceptedThenOffsetConfirmed(t *testing.T) {
	h := newHarness(t, nil)
	sink := newFakeSink()
	h.run(t, sink)
	u := h.srv.Private(alice, "hello there")
	id := h.srv.AddUpdate(u)
	sink.waitFor(t, "the message", func() bool { return len(sink.accepted) == 1 })
	in := sink.accepted[0]
	want := core.ConversationKey{Channel: "telegram", Chat: "42"}
	if in.Conversation != want || !in.Private || !in.Mentioned || in.Text != "hello there" || in.UserID != "42" {
		t.Fatalf("inbound = %+v, want private conversation %v with the text", in, want)
	}
	if in.MessageID != fmt.Sprintf("42:%d", u.Message.ID) {
		t.Errorf("MessageID = %q, want chat:message", in.MessageID)
	}
	h.srv.WaitFor(t, "offset past the update", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > id })
	if h.bot.LastEvent().IsZero() {
		t.Error("LastEvent is zero after an update")
	}
	// allowed_updates asked for what the issue lists.
	calls := h.srv.Calls("getUpdates")
	// Every call goes as the library sends its own: a multipart form
	// (a Bot API server need not read JSON), the offset confirming the
	// update once it was accepted.
	confirmed := false
	for _, c := range calls {
		if c.ContentType != "multipart/form-data" {
			t.Fatalf("getUpdates sent as %q, want multipart/form-data", c.ContentType)
		}
		if c.Params["timeout"] == "" {
			t.Fatalf("getUpdates form %v has no timeout", c.Params)
		}
		confirmed = confirmed || c.Params["offset"] == strconv.FormatInt(id+1, 10)
	}
	if !confirmed {
		t.Errorf("no getUpdates form carried offset %d", id+1)
	}
	var au []string
	if err := json.Unmarshal([]byte(calls[0].Params["allowed_updates"]), &au); err != nil {
		t.Fatalf("allowed_updates %q: %v", calls[0].Params["allowed_updates"], err)
	}
	for _, k := range []string{"message", "edited_message", "message_reaction", "callback_query"} {
		if !strings.Contains(strings.Join(au, ","), k) {
			t.Errorf("allowed_updates %v lacks %s", au, k)
		}
	}
}

func TestSetMyCommandsAtStart(t *testing.T) {
	h := newHarness(t, nil)
	h.run(t, newFakeSink())
	h.srv.WaitFor(t, "setMyCommands", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "setMyCommands" {
				return true
			}
		}
		return false
	})
	var cmds []models.BotCommand
	if err := json.Unmarshal([]byte(h.srv.Calls("setMyCommands")[0].Params["commands"]), &cmds); err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 2 || cmds[0].Command != "model" || cmds[1].Command != "new" {
		t.Errorf("commands = %+v, want model and new (the invalid name dropped)", cmds)
	}
}

func TestInboundFilters(t *testing.T) {
	h := newHarness(t, nil)
	h.bot.me = models.User{ID: 123456, IsBot: true, Username: "talon_bot"}
	botMsg := &models.Message{ID: 9, From: &h.bot.me}
	group := func(text string, mod func(*models.Message)) *models.Message {
		u := h.srv.Group(groupID, alice, text, 0)
		if mod != nil {
			mod(u.Message)
		}
		return u.Message
	}
	tests := []struct {
		name       string
		cfg        func(*Bot)
		msg        *models.Message
		wantOK     bool
		wantText   string
		wantThread string
	}{
		{name: "group without mention ignored", msg: group("just chatting", nil)},
		{name: "group with mention answered, mention stripped", msg: group("@talon_bot what is Go?", nil), wantOK: true, wantText: "what is Go?"},
		{name: "mention in the middle, any case", msg: group("hey @Talon_Bot, help", nil), wantOK: true, wantText: "hey help"},
		{name: "someone else's mention", msg: group("@talon_bot_fan hi", nil)},
		{name: "reply to the bot answered", msg: group("and then?", func(m *models.Message) { m.ReplyToMessage = botMsg }), wantOK: true, wantText: "and then?"},
		{name: "command answered", msg: group("/status", nil), wantOK: true, wantText: "/status"},
		{name: "command for us, suffix stripped", msg: group("/model@talon_bot gpt", nil), wantOK: true, wantText: "/model gpt"},
		{name: "command for another bot ignored", msg: group("/model@other_bot", nil)},
		{name: "forum topic keeps the thread", msg: h.srv.Group(groupID, alice, "@talon_bot hi", 77).Message, wantOK: true, wantText: "hi", wantThread: "77"},
		// A forum's topic message that does not say is_topic_message:
		// its message_thread_id in a forum chat is the topic, unless it
		// replies to an ordinary message.
		{name: "forum topic without is_topic_message keeps the thread", msg: group("@talon_bot hi", func(m *models.Message) {
			m.Chat.IsForum, m.MessageThreadID = true, 77
		}), wantOK: true, wantText: "hi", wantThread: "77"},
		{name: "forum topic reply to its creation keeps the thread", msg: group("@talon_bot hi", func(m *models.Message) {
			m.Chat.IsForum, m.MessageThreadID = true, 77
			m.ReplyToMessage = &models.Message{ID: 77, ForumTopicCreated: &models.ForumTopicCreated{Name: "ops"}}
		}), wantOK: true, wantText: "hi", wantThread: "77"},
		// A reply in a forum's General topic carries its reply chain's id
		// as message_thread_id, without is_topic_message: no topic.
		{name: "reply in a forum's General topic is no topic", msg: group("and then?", func(m *models.Message) {
			m.Chat.IsForum, m.MessageThreadID, m.ReplyToMessage = true, 9, botMsg
		}), wantOK: true, wantText: "and then?"},
		// Outside a forum a message_thread_id is a reply chain, not a topic.
		{name: "reply chain in a plain supergroup is no topic", msg: group("@talon_bot hi", func(m *models.Message) { m.MessageThreadID = 55 }), wantOK: true, wantText: "hi"},
		{name: "trigger all answers without mention", cfg: func(b *Bot) { b.trigger = config.TriggerAll }, msg: group("just chatting", nil), wantOK: true, wantText: "just chatting"},
		{name: "other bots ignored", msg: group("@talon_bot hi", func(m *models.Message) { m.From = &models.User{ID: 5, IsBot: true} })},
		{name: "ourselves ignored", msg: group("@talon_bot hi", func(m *models.Message) { m.From = &h.bot.me })},
		{name: "no sender (channel post) ignored", msg: group("@talon_bot hi", func(m *models.Message) { m.From = nil })},
		{name: "empty text ignored", msg: group("", nil)},
		{name: "caption used", msg: group("", func(m *models.Message) { m.Caption = "@talon_bot look" }), wantOK: true, wantText: "look"},
		{name: "allow_users by id", cfg: allowUsers("42"), msg: group("@talon_bot hi", nil), wantOK: true, wantText: "hi"},
		{name: "allow_users by @username", cfg: allowUsers("@Alice"), msg: group("@talon_bot hi", nil), wantOK: true, wantText: "hi"},
		{name: "allow_users excludes others", cfg: allowUsers("@carol", "99"), msg: group("@talon_bot hi", nil)},
		// Issue 25, finding 7: ids and names are kept apart.
		{name: "a username spelled like an allowed id is refused", cfg: allowUsers("42"),
			msg: group("@talon_bot hi", func(m *models.Message) { m.From = &models.User{ID: 7, Username: "42"} })},
		{name: "allow_chats excludes others", cfg: func(b *Bot) { b.chats = toolkit.NewAccess([]string{"-1"}, toolkit.Digits) }, msg: group("@talon_bot hi", nil)},
		{name: "allow_chats includes", cfg: func(b *Bot) { b.chats = toolkit.NewAccess([]string{fmt.Sprint(groupID)}, toolkit.Digits) }, msg: group("@talon_bot hi", nil), wantOK: true, wantText: "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(h.bot.o)
			if err != nil {
				t.Fatal(err)
			}
			b.me = h.bot.me
			if tt.cfg != nil {
				tt.cfg(b)
			}
			in, ok := b.inbound(tt.msg, nil)
			if ok != tt.wantOK {
				t.Fatalf("accepted = %v, want %v (%+v)", ok, tt.wantOK, in)
			}
			if !ok {
				return
			}
			if in.Text != tt.wantText || in.Conversation.Thread != tt.wantThread || in.Conversation.Chat != fmt.Sprint(groupID) {
				t.Errorf("inbound = text %q thread %q chat %q; want %q %q %d", in.Text, in.Conversation.Thread, in.Conversation.Chat, tt.wantText, tt.wantThread, groupID)
			}
			if in.Private {
				t.Error("group message marked private")
			}
		})
	}
}

// knowingSink is a sink that knows some commands (core.CommandKnower).
type knowingSink struct {
	*fakeSink
	known map[string]bool
}

func (s knowingSink) KnowsCommand(name string) bool { return s.known[name] }

// In a group a bare command is the bot's when core has it; another bot's
// is left alone unless the message names or replies to the bot. A token
// Telegram marks a command but core reads as text ("/2") is no other
// bot's command, and a forward is its author's words, as written.
func TestInboundGroupCommands(t *testing.T) {
	h := newHarness(t, nil)
	h.bot.me = models.User{ID: 123456, IsBot: true, Username: "talon_bot"}
	sink := knowingSink{fakeSink: newFakeSink(), known: map[string]bool{"status": true}}
	group := func(text string, mod func(*models.Message)) *models.Message {
		u := h.srv.Group(groupID, alice, text, 0)
		if mod != nil {
			mod(u.Message)
		}
		return u.Message
	}
	replyToBot := func(m *models.Message) { m.ReplyToMessage = &models.Message{ID: 9, From: &h.bot.me} }
	forwarded := func(m *models.Message) {
		m.ForwardOrigin = &models.MessageOrigin{Type: models.MessageOriginTypeUser,
			MessageOriginUser: &models.MessageOriginUser{Type: models.MessageOriginTypeUser, SenderUser: models.User{ID: 7, Username: "bob"}}}
	}
	all := func(b *Bot) { b.trigger = config.TriggerAll }
	tests := []struct {
		name     string
		all      bool
		msg      *models.Message
		wantOK   bool
		wantText string
	}{
		{name: "a command core has", msg: group("/status", nil), wantOK: true, wantText: "/status"},
		{name: "a command core has, in capitals", msg: group("/Status", nil), wantOK: true, wantText: "/Status"},
		{name: "another bot's bare command", msg: group("/weather Berlin", nil)},
		{name: "another bot's bare command with trigger all", all: true, msg: group("/weather Berlin", nil)},
		{name: "an unknown command naming the bot, any case", msg: group("/weather@Talon_Bot Berlin", nil), wantOK: true, wantText: "/weather Berlin"},
		{name: "an unknown command with a mention", msg: group("/weather @talon_bot", nil), wantOK: true, wantText: "/weather"},
		{name: "an unknown command replying to the bot", msg: group("/weather", replyToBot), wantOK: true, wantText: "/weather"},
		{name: "another bot's bare command in a caption", msg: group("", func(m *models.Message) { m.Caption = "/weather Berlin" })},
		{name: "a command core has in a caption", msg: group("", func(m *models.Message) { m.Caption = "/status" }), wantOK: true, wantText: "/status"},
		{name: "a token core reads as text addresses no one", msg: group("/2 cups of flour?", nil)},
		{name: "a token core reads as text, trigger all", all: true, msg: group("/2 cups of flour?", nil), wantOK: true, wantText: "/2 cups of flour?"},
		{name: "a forwarded command of another bot, trigger all", all: true, msg: group("/weather@other_bot Berlin", forwarded), wantOK: true, wantText: "/weather@other_bot Berlin"},
		{name: "a forward naming the bot, trigger all", all: true, msg: group("@talon_bot deploy now", forwarded), wantOK: true, wantText: "@talon_bot deploy now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(h.bot.o)
			if err != nil {
				t.Fatal(err)
			}
			b.me = h.bot.me
			if tt.all {
				all(b)
			}
			in, ok := b.inbound(tt.msg, sink)
			if ok != tt.wantOK {
				t.Fatalf("accepted = %v, want %v (%+v)", ok, tt.wantOK, in)
			}
			if ok && in.Text != tt.wantText {
				t.Errorf("text = %q, want %q", in.Text, tt.wantText)
			}
		})
	}
}

func allowUsers(us ...string) func(*Bot) {
	return func(b *Bot) { b.users = toolkit.NewAccess(us, toolkit.Digits) }
}

func TestReactionsMapping(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name     string
		old, new []string
		want     []string // "+👎:-1" = added, polarity
	}{
		{"thumbs down added", nil, []string{"👎"}, []string{"+👎:-1"}},
		{"heart with variation selector", nil, []string{"❤️"}, []string{"+❤:1"}},
		{"heart as Telegram sends it", nil, []string{"❤"}, []string{"+❤:1"}},
		{"changed mind", []string{"👍"}, []string{"👎"}, []string{"-👍:1", "+👎:-1"}},
		{"removed", []string{"🔥"}, nil, []string{"-🔥:1"}},
		{"unmapped emoji ignored", nil, []string{"🤔"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := telegramtest.Reaction(42, models.ChatTypePrivate, 77, alice, tt.old, tt.new)
			rs := h.bot.reactionEvents(u.MessageReaction)
			var got []string
			for _, r := range rs {
				sign := "-"
				if r.Added {
					sign = "+"
				}
				got = append(got, fmt.Sprintf("%s%s:%d", sign, r.Emoji, r.Polarity))
				if r.MessageID != "42:77" || r.UserID != "42" || r.Conversation.Chat != "42" || r.EventID == "" {
					t.Errorf("reaction %+v: wrong ids", r)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("reactions = %v, want %v", got, tt.want)
			}
		})
	}
	// A configured mapping replaces the default.
	h2 := newHarness(t, func(c *config.Telegram, _ *Options) {
		c.Reactions = config.Reactions{Positive: []string{"🤔"}, Negative: []string{"👍"}}
	})
	rs := h2.bot.reactionEvents(telegramtest.Reaction(42, models.ChatTypePrivate, 1, alice, nil, []string{"👍", "🤔", "👎"}).MessageReaction)
	pol := map[string]core.Polarity{}
	for _, r := range rs {
		pol[r.Emoji] = r.Polarity
	}
	if len(pol) != 2 || pol["👍"] != core.Negative || pol["🤔"] != core.Positive {
		t.Errorf("configured mapping gave %v", pol)
	}
}

func TestReactionAndEditReachSink(t *testing.T) {
	h := newHarness(t, nil)
	sink := newFakeSink()
	h.run(t, sink)
	u := h.srv.Private(alice, "first text")
	h.srv.AddUpdate(u)
	edited := *u.Message
	edited.Text = "second text"
	h.srv.AddUpdate(models.Update{EditedMessage: &edited})
	h.srv.AddUpdate(telegramtest.Reaction(42, models.ChatTypePrivate, 5001, alice, nil, []string{"👎"}))
	sink.waitFor(t, "edit and reaction", func() bool { return len(sink.edits) == 1 && len(sink.reacts) == 1 })
	if sink.edits[0].Text != "second text" || sink.edits[0].MessageID != sink.accepted[0].MessageID {
		t.Errorf("edit = %+v, want the new text for message %s", sink.edits[0], sink.accepted[0].MessageID)
	}
	if r := sink.reacts[0]; r.Polarity != core.Negative || !r.Added || r.MessageID != "42:5001" {
		t.Errorf("reaction = %+v", r)
	}
}

func TestUncommittedUpdateIsReadAgain(t *testing.T) {
	h := newHarness(t, nil)
	sink := newFakeSink()
	sink.failNext = 2
	h.run(t, sink)
	id := h.srv.AddUpdate(h.srv.Private(alice, "keep me"))
	sink.waitFor(t, "the message after two failures", func() bool { return len(sink.accepted) == 1 })
	h.srv.WaitFor(t, "offset past the update", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { return h.srv.Confirmed() > id })
	// Every getUpdates before the commit kept the offset at or below it.
	accepts := 0
	for _, c := range h.srv.Calls("getUpdates") {
		if c.Params["offset"] != "" && c.Params["offset"] > fmt.Sprint(id) {
			accepts++
		}
	}
	if accepts == 0 {
		t.Error("offset never moved past the update")
	}
	if sink.failNext != 0 {
		t.Errorf("Accept was not retried: %d failures left", sink.failNext)
	}
}

func TestConflictReportedAndUnhealthy(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := newHarness(t, func(_ *config.Telegram, o *Options) { o.Now = clock })
	// A webhook set for the token makes getUpdates answer 409, as Telegram does.
	if _, err := h.bot.api.SetWebhook(context.Background(), &tgbot.SetWebhookParams{URL: "https://elsewhere.example/hook"}); err != nil {
		t.Fatal(err)
	}
	h.run(t, newFakeSink())
	h.srv.WaitFor(t, "a few getUpdates", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		n := 0
		for _, c := range calls {
			if c.Method == "getUpdates" {
				n++
			}
		}
		return n >= 3
	})
	if err := h.bot.Healthy(); err != nil {
		t.Fatalf("Healthy right after the first conflict = %v, want nil (a minute of grace)", err)
	}
	advance(2 * time.Minute)
	err := h.bot.Healthy()
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "webhook is active") {
		t.Fatalf("Healthy after 2 minutes of 409s = %v, want the conflict", err)
	}
	if !strings.Contains(h.logs.String(), "another process is polling with this bot token, or a webhook is set") {
		t.Errorf("the conflict is not explained in the log:\n%s", h.logs.String())
	}
	// Backoff grows instead of hammering the API.
	var grew bool
	for _, d := range h.sleeps.all() {
		if d >= 4*time.Second {
			grew = true
		}
	}
	if !grew {
		t.Errorf("waits between conflicts %v never grew", h.sleeps.all())
	}
}

func TestSendQuotesFirstPartAndStaysInTopic(t *testing.T) {
	h := newHarness(t, nil)
	to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: fmt.Sprint(groupID), Thread: "77"}, ReplyTo: fmt.Sprintf("%d:555", groupID), Parts: 2, Meta: map[string]string{"chat_type": "supergroup"}}
	id0, err := h.bot.Send(context.Background(), to, "<b>one</b>")
	if err != nil {
		t.Fatal(err)
	}
	to.Part = 1
	if _, err := h.bot.Send(context.Background(), to, "two"); err != nil {
		t.Fatal(err)
	}
	sent := h.srv.Sent()
	if len(sent) != 2 {
		t.Fatalf("sent %d messages, want 2", len(sent))
	}
	if sent[0].ReplyTo != 555 || sent[0].ThreadID != 77 || sent[0].ParseMode != "HTML" || sent[0].ChatID != groupID {
		t.Errorf("first part = %+v, want a reply to 555 in topic 77 as HTML", sent[0])
	}
	if sent[1].ReplyTo != 0 || sent[1].ThreadID != 77 {
		t.Errorf("second part = %+v, want no quote, same topic", sent[1])
	}
	if id0 != fmt.Sprintf("%d:%d", groupID, sent[0].MessageID) {
		t.Errorf("Send returned %q, want chat:message id", id0)
	}
}

func TestSendFallsBackToPlainText(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("sendMessage", telegramtest.Failure{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0"})
	part := `<b>Bold</b> &amp; <a href="https://e.com">link</a>`
	to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}, Parts: 1}
	if _, err := h.bot.Send(context.Background(), to, part); err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := h.srv.Sent()
	if len(sent) != 1 || sent[0].ParseMode != "" || sent[0].Text != "Bold & link (https://e.com)" {
		t.Fatalf("sent = %+v, want one plain-text resend", sent)
	}
	if n := len(h.srv.Calls("sendMessage")); n != 2 {
		t.Errorf("sendMessage called %d times, want 2 (HTML then plain)", n)
	}
}

func TestSendWaitsOut429(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("sendMessage", telegramtest.Failure{Code: 429, Description: "Too Many Requests: retry after 7", RetryAfter: 7})
	to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}, Parts: 1}
	if _, err := h.bot.Send(context.Background(), to, "hi"); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if sent := h.srv.Sent(); len(sent) != 1 {
		t.Fatalf("delivered %d times, want once", len(sent))
	}
	waited := false
	for _, d := range h.sleeps.all() {
		if d == 7*time.Second {
			waited = true
		}
	}
	if !waited {
		t.Errorf("waits %v do not include retry_after 7s", h.sleeps.all())
	}
}

func TestSendGivesUpOnOther400(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("sendMessage", telegramtest.Failure{Code: 403, Description: "Forbidden: bot was blocked by the user"})
	_, err := h.bot.Send(context.Background(), core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}}, "hi")
	if err == nil || core.ErrorKind(err) != core.KindBadRequest || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v (kind %v), want a bad-request error without the token", err, core.ErrorKind(err))
	}
}

// A 403 (blocked by the user, kicked from the group) says the chat takes
// no more messages, so the gateway drops the answer instead of sending an
// apology into the same refusal.
func TestSendRefusedByABlockedChatIsRecipientGone(t *testing.T) {
	for _, desc := range []string{"Forbidden: bot was blocked by the user", "Forbidden: bot was kicked from the group chat", "Forbidden: user is deactivated"} {
		h := newHarness(t, nil)
		h.srv.Fail("sendMessage", telegramtest.Failure{Code: 403, Description: desc})
		_, err := h.bot.Send(context.Background(), core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}}, "hi")
		if !errors.Is(err, core.ErrRecipientGone) || !strings.Contains(err.Error(), desc) {
			t.Fatalf("%s: err = %v; want core.ErrRecipientGone with Telegram's words", desc, err)
		}
	}
	// A 400, and a 403 for a reason the operator can fix (the bot is not
	// in the channel, or lacks the right to post there), are no gone
	// recipient: the operator hears of them.
	for _, f := range []telegramtest.Failure{
		{Code: 400, Description: "Bad Request: message text is empty"},
		{Code: 403, Description: "Forbidden: bot is not a member of the channel chat"},
		{Code: 403, Description: "Forbidden: need administrator rights in the channel chat"},
		{Code: 403, Description: "Forbidden: not enough rights to send text messages to the chat"},
		{Code: 403, Description: "Forbidden: bot can't initiate conversation with a user"},
	} {
		h := newHarness(t, nil)
		h.srv.Fail("sendMessage", f)
		_, err := h.bot.Send(context.Background(), core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}}, "hi")
		if err == nil || errors.Is(err, core.ErrRecipientGone) || core.ErrorKind(err) != core.KindBadRequest {
			t.Fatalf("%s: err = %v (kind %v); want a bad_request error, no gone recipient", f.Description, err, core.ErrorKind(err))
		}
	}
}

func TestWorkingTypingAndAckReaction(t *testing.T) {
	h := newHarness(t, func(_ *config.Telegram, o *Options) { o.TypingEvery = 5 * time.Millisecond })
	in := core.Inbound{Conversation: core.ConversationKey{Channel: Name, Chat: fmt.Sprint(groupID), Thread: "77"}, MessageID: fmt.Sprintf("%d:321", groupID)}
	stop := h.bot.Working(context.Background(), in)
	h.srv.WaitFor(t, "typing twice", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		n := 0
		for _, c := range calls {
			if c.Method == "sendChatAction" && c.Params["action"] == "typing" && c.Params["message_thread_id"] == "77" {
				n++
			}
		}
		return n >= 2
	})
	stop()
	reacts := h.srv.Calls("setMessageReaction")
	if len(reacts) != 2 {
		t.Fatalf("setMessageReaction calls = %d, want set and clear", len(reacts))
	}
	if !strings.Contains(reacts[0].Params["reaction"], "👀") || reacts[0].Params["message_id"] != "321" {
		t.Errorf("ack = %v, want 👀 on message 321", reacts[0].Params)
	}
	if strings.Contains(reacts[1].Params["reaction"], "👀") {
		t.Errorf("second call %v should clear the reaction", reacts[1].Params)
	}
	typing := len(h.srv.Calls("sendChatAction"))
	stop() // idempotent
	if n := len(h.srv.Calls("sendChatAction")); n != typing {
		t.Errorf("typing continued after stop: %d → %d", typing, n)
	}
}

func TestWebhookSecret(t *testing.T) {
	h, sink, addr := runWebhook(t)
	h.srv.WaitFor(t, "setWebhook", 5*time.Second, func([]telegramtest.Sent, []telegramtest.Call) bool { u, _ := h.srv.Webhook(); return u != "" })
	if u, s := h.srv.Webhook(); u != "https://bot.example.com/telegram" || s != "hook-secret" {
		t.Fatalf("setWebhook got url %q secret %q", u, s)
	}
	body, _ := json.Marshal(h.srv.Private(alice, "via webhook"))
	post := func(secret string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/telegram", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("missing secret: status %d, want 401", code)
	}
	if code := post("wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong secret: status %d, want 401", code)
	}
	sink.mu.Lock()
	n := len(sink.accepted)
	sink.mu.Unlock()
	if n != 0 {
		t.Fatalf("a request with a wrong secret reached the gateway")
	}
	if code := post("hook-secret"); code != http.StatusOK {
		t.Fatalf("right secret: status %d, want 200", code)
	}
	sink.waitFor(t, "the webhook message", func() bool { return len(sink.accepted) == 1 && sink.accepted[0].Text == "via webhook" })
	if len(h.srv.Calls("getUpdates")) != 0 {
		t.Error("webhook mode polled getUpdates")
	}
	// A body far larger than any update is refused without reading it all.
	huge := `{"update_id": 1, "message": {"text": "` + strings.Repeat("x", 2<<20) + `"}}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/telegram", strings.NewReader(huge))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "hook-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB webhook body: status %d, want 413", resp.StatusCode)
	}
}

func TestBadTokenAndUnreachableServerNeverShowToken(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("getMe", telegramtest.Failure{Code: 401, Description: "Unauthorized"})
	err := h.bot.Run(context.Background(), newFakeSink())
	if err == nil || core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "channels.telegram.token") {
		t.Fatalf("Run with a refused token = %v, want an auth error naming channels.telegram.token", err)
	}
	h2 := newHarness(t, func(c *config.Telegram, _ *Options) { c.APIURL = "http://127.0.0.1:1" })
	err = h2.bot.Run(context.Background(), newFakeSink())
	if err == nil || strings.Contains(err.Error(), "SECRET-token") {
		t.Fatalf("Run against a closed port = %v, want an error without the token", err)
	}
	if _, err := New(Options{Config: config.Telegram{}}); err == nil || !strings.Contains(err.Error(), "channels.telegram.token") {
		t.Errorf("New without a token = %v, want an error naming channels.telegram.token", err)
	}
}

func TestFormatLongReplyGivesValidParts(t *testing.T) {
	h := newHarness(t, nil)
	var md strings.Builder
	for i := 0; md.Len() < 10000; i++ {
		fmt.Fprintf(&md, "Paragraph %d with **bold** & <angle>.\n\n```go\nfunc f%d() { if a < b { return } }\n", i, i)
		for range 8 {
			md.WriteString("\tx := y && z\n")
		}
		md.WriteString("```\n\n")
	}
	parts := h.bot.Format(md.String())
	if len(parts) < 3 {
		t.Fatalf("%d parts for %d chars", len(parts), md.Len())
	}
	to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}, Parts: len(parts)}
	for i, p := range parts {
		if textfmt.Len(p) > MaxMessage {
			t.Errorf("part %d has %d units", i, textfmt.Len(p))
		}
		to.Part = i
		if _, err := h.bot.Send(context.Background(), to, p); err != nil {
			t.Fatalf("part %d refused: %v", i, err)
		}
	}
	for _, s := range h.srv.Sent() {
		if s.ParseMode != "HTML" {
			t.Errorf("a part fell back to plain text: %q", s.Text[:50])
		}
	}
}

// TestPacingOfQuestionsRepliesAndLongRuns drives Send as the gateway does:
// three quick questions in a private chat are answered at once, a 5-part
// reply is paced, and a long run of quick questions settles at about one
// message a second; a group settles at about 20 a minute.
func TestPacingOfQuestionsRepliesAndLongRuns(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := newHarness(t, func(_ *config.Telegram, o *Options) {
		o.SendGap = 0 // the default: a burst of 3, then 1s
		// The bot's sleeps move the clock, so pacing is measured in the
		// time the bot asked to wait.
		o.Now, o.Sleep = clk.Now, clk.AutoSleep
	})
	ctx := context.Background()
	send := func(chat string, group bool, part, parts int) time.Time {
		t.Helper()
		meta := map[string]string{"chat_type": "private"}
		if group {
			meta["chat_type"] = "supergroup"
		}
		if _, err := h.bot.Send(ctx, core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: chat}, Meta: meta, Part: part, Parts: parts}, "hi"); err != nil {
			t.Fatal(err)
		}
		return clk.Now()
	}
	// Three quick questions, each asked 300ms after the previous answer.
	start := clk.Now()
	for i := range 3 {
		if at := send("42", false, 0, 1); at.Sub(start) > time.Duration(i)*300*time.Millisecond {
			t.Fatalf("answer %d went out %s after the first question; no pacing delay expected", i+1, at.Sub(start))
		}
		clk.Advance(300 * time.Millisecond)
	}
	// A 5-part reply in another chat: three at once, then paced.
	start = clk.Now()
	var at []time.Duration
	for i := range 5 {
		at = append(at, send("43", false, i, 5).Sub(start))
	}
	if at[2] != 0 || at[3] < 900*time.Millisecond || at[4] < 1900*time.Millisecond {
		t.Fatalf("5-part reply sent at %v; want three at once, then about one a second", at)
	}
	// A long run of quick questions settles at about one a second.
	start = clk.Now()
	for range 60 {
		send("44", false, 0, 1)
		clk.Advance(100 * time.Millisecond)
	}
	if rate := 60 / clk.Now().Sub(start).Seconds(); rate < 0.9 || rate > 1.15 {
		t.Fatalf("a long run went out at %.2f messages/s; want about 1", rate)
	}
	// A group: about 20 a minute.
	start = clk.Now()
	for range 40 {
		send("-100", true, 0, 1)
	}
	if perMin := 40 / clk.Now().Sub(start).Minutes(); perMin < 18 || perMin > 22 {
		t.Fatalf("a group got %.1f messages a minute; want about 20", perMin)
	}
}

// TestRevokedTokenWhilePollingIsReportedNotFatal: a 401 from getUpdates
// after a good start marks the channel down at once, names the config key
// in the log, and keeps polling slowly instead of stopping the gateway.
func TestRevokedTokenWhilePollingIsReportedNotFatal(t *testing.T) {
	h := newHarness(t, nil)
	sink := newFakeSink()
	h.srv.Fail("getUpdates", telegramtest.Failure{Code: 401, Description: "Unauthorized"})
	done := h.run(t, sink)
	h.srv.AddUpdate(h.srv.Private(alice, "after the 401"))
	sink.waitFor(t, "a message after the 401", func() bool { return len(sink.accepted) == 1 })
	select {
	case err := <-done:
		t.Fatalf("Run returned %v after a 401 from getUpdates", err)
	default:
	}
	if !strings.Contains(h.logs.String(), "channels.telegram.token") {
		t.Errorf("the log does not name channels.telegram.token:\n%s", h.logs.String())
	}
	var slow bool
	for _, d := range h.sleeps.all() {
		slow = slow || d == 30*time.Second
	}
	if !slow {
		t.Errorf("waits %v: want a 30s pause after the 401", h.sleeps.all())
	}
}

// TestGetMeGoesBesideTheFirstPoll: a bot polling on its own asks for
// updates without waiting for getMe's answer (a start waits one round
// trip less), and hands nothing over before that answer: a group message
// mentioning the bot, fetched while getMe is slow, is taken as a mention
// once getMe has told the bot's name.
func TestGetMeGoesBesideTheFirstPoll(t *testing.T) {
	h := newHarness(t, nil)
	release := h.srv.Hold("getMe")
	defer release()
	h.srv.AddUpdate(h.srv.Group(groupID, alice, "@talon_bot are you there?", 0))
	sink := newFakeSink()
	h.run(t, sink)
	h.srv.WaitFor(t, "a getUpdates while getMe is unanswered", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "getUpdates" {
				return true
			}
		}
		return false
	})
	release()
	sink.waitFor(t, "the mention", func() bool { return len(sink.accepted) == 1 })
	if in := sink.accepted[0]; !in.Mentioned || in.Text != "are you there?" {
		t.Errorf("accepted %+v; want the mention, with the bot's name stripped", in)
	}
}

// TestRefusedTokenEndsThePollingRun: when every call is refused, Run
// ends with getMe's error, naming the key, although getUpdates went out
// beside it.
func TestRefusedTokenEndsThePollingRun(t *testing.T) {
	h := newHarness(t, func(c *config.Telegram, _ *Options) { c.Token = "4243:another-token" })
	done := make(chan error, 1)
	go func() { done <- h.bot.Run(context.Background(), newFakeSink()) }()
	select {
	case err := <-done:
		if core.ErrorKind(err) != core.KindAuth || !strings.Contains(err.Error(), "getMe") || !strings.Contains(err.Error(), "channels.telegram.token") {
			t.Fatalf("Run with a refused token = %v; want getMe's auth error naming channels.telegram.token", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run with a refused token did not end")
	}
}

func TestButtonPressIsAnsweredAndGoesNoFurther(t *testing.T) {
	h := newHarness(t, nil)
	sink := newFakeSink()
	h.run(t, sink)
	msg := h.srv.Private(alice, "a message with a button").Message
	h.srv.AddUpdate(models.Update{CallbackQuery: &models.CallbackQuery{
		ID:      "press-7",
		From:    *alice,
		Message: models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeMessage, Message: msg},
		Data:    "old-button",
	}})
	h.srv.WaitFor(t, "answerCallbackQuery", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "answerCallbackQuery" {
				return true
			}
		}
		return false
	})
	got := h.srv.Calls("answerCallbackQuery")
	if len(got) != 1 || got[0].Params["callback_query_id"] != "press-7" {
		t.Errorf("answerCallbackQuery calls = %+v, want one for press-7", got)
	}
	// A text message after it is the first thing the sink sees.
	h.srv.AddUpdate(h.srv.Private(alice, "after the press"))
	sink.waitFor(t, "the next message", func() bool { return len(sink.accepted) == 1 })
	if sink.accepted[0].Text != "after the press" || len(sink.reacts) != 0 || len(sink.edits) != 0 {
		t.Errorf("sink saw %+v / %+v / %+v, want only the next message", sink.accepted, sink.reacts, sink.edits)
	}
}

// TestPrivateChatKeepsItsConversationOutsideTopics: a private chat's
// messages outside a topic keep the chat's one conversation (its key and
// so its history, as before private topics existed), a reply whose
// message_thread_id is only its reply chain included; only a message
// Telegram marks is_topic_message (the bot's threaded mode) is a topic's.
func TestPrivateChatKeepsItsConversationOutsideTopics(t *testing.T) {
	h := newHarness(t, nil)
	h.bot.me = models.User{ID: 123456, IsBot: true, Username: "talon_bot"}
	tests := []struct {
		name       string
		mod        func(*models.Message)
		wantThread string
	}{
		{name: "plain", mod: func(*models.Message) {}},
		{name: "a reply carrying its reply chain's id", mod: func(m *models.Message) {
			m.MessageThreadID = 9
			m.ReplyToMessage = &models.Message{ID: 9, From: &h.bot.me, Chat: m.Chat}
		}},
		{name: "a topic of the chat", mod: func(m *models.Message) { m.MessageThreadID, m.IsTopicMessage = 5, true }, wantThread: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := h.srv.Private(alice, "hello").Message
			tt.mod(m)
			in, ok := h.bot.inbound(m, nil)
			want := core.ConversationKey{Channel: Name, Chat: "42", Thread: tt.wantThread}
			if !ok || in.Conversation != want {
				t.Fatalf("inbound ok=%v conversation %+v; want %+v", ok, in.Conversation, want)
			}
		})
	}
}

// TestReplyIsNotFollowedByTyping: an answer faster than the indicator
// (a command's reply, an instant model) is not followed by a typing
// call: Telegram clears "typing…" when the bot's message arrives, and a
// typing call after it would show "typing…" for 5 seconds under the
// answer. Here the ack is held, so the first typing would come after the
// reply; a typing call under way when the reply goes is waited for.
func TestReplyIsNotFollowedByTyping(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	conv := core.ConversationKey{Channel: Name, Chat: "42"}
	release := h.srv.Hold("setMessageReaction")
	stop := h.bot.Working(ctx, core.Inbound{Conversation: conv, MessageID: "42:321"})
	h.srv.WaitFor(t, "the ack under way", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		return len(h.srv.Calls("setMessageReaction")) == 1
	})
	if _, err := h.bot.Send(ctx, core.Outbound{Conversation: conv}, "the answer"); err != nil {
		t.Fatal(err)
	}
	release()
	stop()
	var order []string
	for _, c := range h.srv.Calls("") {
		if c.Method == "sendChatAction" || c.Method == "sendMessage" {
			order = append(order, c.Method)
		}
	}
	if len(order) == 0 || order[len(order)-1] != "sendMessage" {
		t.Errorf("calls %v: a typing call came after the reply", order)
	}

	// A typing call under way when a reply is sent is waited for: the
	// reply reaches Telegram after it.
	release = h.srv.Hold("sendChatAction")
	t.Cleanup(release)
	typed := len(h.srv.Calls("sendChatAction"))
	stop = h.bot.Working(ctx, core.Inbound{Conversation: conv})
	h.srv.WaitFor(t, "typing under way", 5*time.Second, func(_ []telegramtest.Sent, calls []telegramtest.Call) bool {
		return len(h.srv.Calls("sendChatAction")) == typed+1
	})
	sent := make(chan error, 1)
	go func() {
		_, err := h.bot.Send(ctx, core.Outbound{Conversation: conv}, "second answer")
		sent <- err
	}()
	select {
	case err := <-sent:
		t.Fatalf("the reply went while a typing call was under way (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	stop()
}

// The webhook secret is a credential like the token: an error answer to
// setWebhook that quotes the request (a proxy's or a self-hosted Bot API
// server's page) must not carry it into the error or the log.
func TestWebhookSecretStaysOutOfErrors(t *testing.T) {
	const secret = "hook-SECRET-value-1"
	h := newHarness(t, func(c *config.Telegram, _ *Options) {
		c.Mode = config.ModeWebhook
		c.Webhook = config.TelegramWebhook{Listen: "127.0.0.1:0", URL: "https://bot.example.com/telegram", Secret: secret}
	})
	h.srv.Fail("setWebhook", telegramtest.Failure{Code: 500, Description: "Internal: could not store secret_token=" + secret})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.bot.Run(ctx, newFakeSink())
	if err == nil || !strings.Contains(err.Error(), "setWebhook") {
		t.Fatalf("Run = %v; want the setWebhook failure", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(h.logs.String(), secret) {
		t.Errorf("the webhook secret shows: error %q; log:\n%s", err, h.logs.String())
	}
}

// The webhook secret may be as short as Telegram allows (one character)
// or a plain word. Scrubbing it from error text must not hide the words
// of Telegram's answer the bot acts on: here "can't parse entities",
// which makes it resend the reply as plain text.
func TestShortWebhookSecretKeepsTelegramsAnswerReadable(t *testing.T) {
	for _, secret := range []string{"parse", "t", "entities"} {
		h := newHarness(t, func(c *config.Telegram, _ *Options) {
			c.Webhook.Secret = config.Secret(secret)
		})
		h.srv.Fail("sendMessage", telegramtest.Failure{Code: 400, Description: "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0"})
		to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: "42"}, Parts: 1}
		if _, err := h.bot.Send(context.Background(), to, "<b>Bold</b>"); err != nil {
			t.Errorf("webhook secret %q: Send: %v; want the plain-text resend", secret, err)
			continue
		}
		if sent := h.srv.Sent(); len(sent) != 1 || sent[0].ParseMode != "" || sent[0].Text != "Bold" {
			t.Errorf("webhook secret %q: sent = %+v, want one plain-text resend", secret, sent)
		}
	}
}

// A group that became a supergroup refuses messages to its old chat id
// with the new one (migrate_to_chat_id): the answer goes there, once,
// rather than failing as a platform outage and being retried; another
// call refused so says what happened and is not retried either.
func TestSendFollowsAGroupUpgradedToASupergroup(t *testing.T) {
	const super = -1001234567890
	h := newHarness(t, nil)
	h.srv.Fail("sendMessage", telegramtest.Failure{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: super})
	to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: fmt.Sprint(groupID)}, Parts: 1, ReplyTo: fmt.Sprintf("%d:5", groupID)}
	id, err := h.bot.Send(context.Background(), to, "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := h.srv.Sent()
	if len(sent) != 1 || sent[0].ChatID != super || !strings.HasPrefix(id, fmt.Sprint(super)+":") {
		t.Fatalf("sent %+v as %q; want one message in the supergroup %d", sent, id, super)
	}
	if sent[0].ReplyTo != 0 {
		// Message 5 of the old group is not message 5 of the supergroup.
		t.Fatalf("the answer in the supergroup quotes its message %d; want no quote", sent[0].ReplyTo)
	}

	h.srv.Fail("deleteMessage", telegramtest.Failure{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: super})
	err = h.bot.Delete(context.Background(), to, fmt.Sprintf("%d:7", groupID))
	if core.ErrorKind(err) != core.KindBadRequest || !strings.Contains(err.Error(), "supergroup with chat id -1001234567890") {
		t.Fatalf("err = %v (kind %v); want a refusal naming the new chat id", err, core.ErrorKind(err))
	}
	if n := len(h.srv.Calls("deleteMessage")); n != 1 {
		t.Fatalf("deleteMessage called %d times; want once, not retried", n)
	}
}
