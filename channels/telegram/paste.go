package telegram

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/core"
)

// A text longer than Telegram's 4,096-character limit is cut by the
// user's client into several messages, sent one right after the other.
// The user asked one question: the parts are handed to the gateway as one
// message, as an album is (album.go). Only a message near the limit opens
// such a paste: a short message is handed over at once, as always.
//
// The parts are held in the adapter, not merged in the queue: the queue
// claims a message the moment it is committed when its conversation is
// idle, so a first part would already be answered when the second came.
// Held parts are not committed yet, and Telegram is told of nothing (the
// offset stays on the first part; a webhook's request stays open), so a
// crash while waiting loses nothing: Telegram delivers them again.

// pasteNear is the length (UTF-16 units, as Telegram counts) from which a
// message may be the first part of a split paste: clients cut at 4,096,
// at a line or word break shortly before it.
const pasteNear = 3500

// pasteGap is the most seconds (Telegram dates messages to the second)
// between two parts of one paste: a client sends them back to back. A
// near-limit message and the user's next one minutes later (read together
// after an outage) stay two messages.
const pasteGap = 3

// pasteRereads bounds the waits of one batch for a paste's next part
// (each albumWait, taken only while new updates keep coming): a paste of
// about 20,000 characters is 5 parts.
const pasteRereads = 6

// pasteHead says m may be a split paste's part that more follow: a plain
// text message (no file, no album, no forward) near Telegram's limit. A
// command is none: core's commands (/new) take no text, so a message
// joined to one would be dropped with its arguments instead of answered.
func pasteHead(m *models.Message) bool {
	return pastePart(m) && textfmt.Len(m.Text) >= pasteNear && !isCommand(m.Text, m.Entities)
}

// pastePart says m may be a part of a split paste: plain text a user
// wrote (a forward is someone else's words).
func pastePart(m *models.Message) bool {
	return m != nil && m.Text != "" && m.MediaGroupID == "" && m.ForwardOrigin == nil &&
		m.From != nil && !m.From.IsBot && len(files(m)) == 0
}

// pasteOpen says the batch ends with a near-limit message: the paste's
// next part may be on its way.
func pasteOpen(updates []models.Update) bool {
	return len(updates) > 0 && pasteHead(updates[len(updates)-1].Message)
}

// pasteHeld is the index of the batch's first update that waits for the
// next part of the paste the batch ends with (pasteOpen): that paste's
// first part here. It is len(updates) when the batch ends with none.
func pasteHeld(updates []models.Update) int {
	if !pasteOpen(updates) {
		return len(updates)
	}
	start := len(updates) - 1
	cur := updates[start].Message
	for j := start - 1; j >= 0; j-- {
		m := updates[j].Message
		if m == nil || m.Chat.ID != cur.Chat.ID {
			continue // another chat's, between the parts: it waits too
		}
		if !nextPart(m, cur) {
			break
		}
		start, cur = j, m
	}
	return start
}

// nextPart says m, sent after prev in the same chat, continues prev's
// paste: prev is near the limit, and m is its author's text in the same
// thread or topic, sent within pasteGap. A command (/stop, /new) the user
// typed right after a long message is a message of its own, never the
// paste's text: a client's cut does not make a bot command.
func nextPart(prev, m *models.Message) bool {
	if !pasteHead(prev) || !pastePart(m) || isCommand(m.Text, m.Entities) {
		return false
	}
	sameAuthor := prev.From.ID == m.From.ID && (prev.SenderChat == nil) == (m.SenderChat == nil) &&
		(prev.SenderChat == nil || prev.SenderChat.ID == m.SenderChat.ID)
	// A reply to another message than the paste's is the user's next
	// message, not the paste cut (a topic's messages all reply to the
	// topic's creation, so that one is the same for every part).
	sameReply := m.ReplyToMessage == nil || prev.ReplyToMessage != nil && prev.ReplyToMessage.ID == m.ReplyToMessage.ID
	return sameAuthor && sameReply && prev.Chat.ID == m.Chat.ID && inTopic(prev) == inTopic(m) &&
		(!inTopic(m) || prev.MessageThreadID == m.MessageThreadID) &&
		m.Date >= prev.Date && m.Date-prev.Date <= pasteGap
}

// pasteParts is how many of the updates from the first, all of one chat
// (the indexes us into updates), are parts of one split paste: 0 when the
// first starts none.
func pasteParts(updates []models.Update, us []int) int {
	n := 1
	for n < len(us) && nextPart(updates[us[n-1]].Message, updates[us[n]].Message) {
		n++
	}
	if n == 1 {
		return 0
	}
	return n
}

// acceptPaste hands a split paste's parts to sink as one message, its
// id the first part's (the key the queue drops a re-read by), its text
// every part's in order. Whether it is for the bot (who may talk, and in
// a group whether it addresses the bot) is the first part's, else the
// last's: a mention is typed at the start or at the end of a long text.
// What the first part replies to is quoted. A paste for no one is
// ignored, as each of its parts would be.
func (b *Bot) acceptPaste(ctx context.Context, sink core.Sink, us []*models.Update) error {
	for range us {
		b.health.Event()
	}
	first, last := us[0].Message, us[len(us)-1].Message
	in, ok := b.inbound(first, sink)
	from := 0 // the part in was made of
	if !ok {
		if in, ok = b.inbound(last, sink); !ok {
			return nil
		}
		from = len(us) - 1
		in.MessageID = platformID(first.Chat.ID, first.ID)
		in.ReplyTo = ""
		if first.ReplyToMessage != nil {
			in.ReplyTo = platformID(first.Chat.ID, first.ReplyToMessage.ID)
		}
		in.ReceivedAt = time.Unix(int64(first.Date), 0)
	}
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = strings.TrimSpace(u.Message.Text)
	}
	parts[from] = in.Text // the bot's mention taken out
	in.Text = strings.Join(parts, "\n")
	in = b.withReplyContext(ctx, sink, first, in)
	if err := sink.Accept(ctx, in); err != nil {
		return fmt.Errorf("update %d (a paste split in %d parts): %w", us[0].ID, len(us), err)
	}
	ids := make([]int, len(us))
	for i, u := range us {
		ids[i] = u.Message.ID
	}
	b.merged.remember(first.Chat.ID, ids, parts, in)
	b.log.Debug("a paste split by the client was handed over as one message", "parts", len(us), "message", in.MessageID)
	return nil
}

// pasteKey is what a webhook gathers the parts of m's paste under: its
// chat, author and topic.
func pasteKey(m *models.Message) albumKey {
	author := m.From.ID
	if m.SenderChat != nil {
		author = m.SenderChat.ID
	}
	thread := 0
	if inTopic(m) {
		thread = m.MessageThreadID
	}
	return albumKey{m.Chat.ID, "paste:" + strconv.FormatInt(author, 10) + ":" + strconv.Itoa(thread)}
}

// joinWebhookPaste is how a webhook request hands over a plain text
// message: a message near the limit waits (its request open, Telegram
// told of nothing) for the paste's next part, as an album's item does
// (webhookAlbums); one that continues a paste being gathered joins it;
// any other is handled at once.
func (b *Bot) joinWebhookPaste(ctx, hctx context.Context, sink core.Sink, u *models.Update) error {
	m := u.Message
	fits := func(pending []*models.Update) bool { return nextPart(pending[len(pending)-1].Message, m) }
	joined, err := b.pastes.gather(hctx, pasteKey(m), u, pasteHead(m), fits, pasteRereads, func(us []*models.Update) error {
		return b.acceptWebhookPaste(ctx, sink, us)
	})
	if joined {
		return err
	}
	return b.handle(hctx, sink, u)
}

// acceptWebhookPaste hands the messages a webhook gathered (in the order
// sent) to sink: the parts of a paste as one message, any other alone.
func (b *Bot) acceptWebhookPaste(ctx context.Context, sink core.Sink, us []*models.Update) error {
	for len(us) > 0 {
		n := 1
		for n < len(us) && nextPart(us[n-1].Message, us[n].Message) {
			n++
		}
		var err error
		if n == 1 {
			err = b.handle(ctx, sink, us[0])
		} else {
			err = b.acceptPaste(ctx, sink, us[:n])
		}
		if err != nil {
			return err
		}
		us = us[n:]
	}
	return nil
}

// partText is the text m, an edited part of a paste, stands for in the
// paste: as inbound reads it (the bot's mention taken out) when m is for
// the bot on its own, else as written.
func (b *Bot) partText(m *models.Message, sink core.Sink) string {
	if in, ok := b.inbound(m, sink); ok {
		return in.Text
	}
	return strings.TrimSpace(m.Text)
}

// mergedPastes remembers the pastes handed over as one message, for
// mergedKept and at most mergedMax of them: an edit of one of a paste's
// parts (Telegram sends edited_message with that part's id) then edits the
// queued paste, the first part's id, to the whole text with the part
// changed. Without it an edit of the first part would replace the whole
// queued paste by that part alone, and an edit of a later part would be
// lost. (After a restart the memory is empty: a paste still queued then
// is edited as its first part, as before.)
type mergedPastes struct {
	mu     sync.Mutex
	byPart map[partKey]*mergedPaste
	order  []*mergedPaste // oldest first
}

// mergedKept is how long a paste's parts are remembered, mergedMax how
// many pastes at most.
const (
	mergedKept = 10 * time.Minute
	mergedMax  = 1000
)

type partKey struct {
	chat int64
	msg  int
}

type mergedPaste struct {
	chat  int64
	ids   []int
	parts []string
	in    core.Inbound // as handed over
	at    time.Time
}

// remember keeps a paste handed over as in, its parts' message ids and
// texts, and forgets the ones kept too long.
func (p *mergedPastes) remember(chat int64, ids []int, parts []string, in core.Inbound) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byPart == nil {
		p.byPart = map[partKey]*mergedPaste{}
	}
	for len(p.order) > 0 && (now.Sub(p.order[0].at) > mergedKept || len(p.order) >= mergedMax) {
		old := p.order[0]
		p.order = p.order[1:]
		for _, id := range old.ids {
			if p.byPart[partKey{old.chat, id}] == old {
				delete(p.byPart, partKey{old.chat, id})
			}
		}
	}
	in.Text = "" // the parts hold it: a paste is kept once, not twice
	mp := &mergedPaste{chat: chat, ids: ids, parts: parts, in: in, at: now}
	for _, id := range ids {
		p.byPart[partKey{chat, id}] = mp
	}
	p.order = append(p.order, mp)
}

// edited says whether m is a part of a remembered paste and, when it is,
// returns the paste as handed over with that part's text now text().
func (p *mergedPastes) edited(m *models.Message, text func() string) (core.Inbound, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	mp, ok := p.byPart[partKey{m.Chat.ID, m.ID}]
	if !ok {
		return core.Inbound{}, false
	}
	i := slices.Index(mp.ids, m.ID)
	mp.parts[i] = text()
	in := mp.in
	in.Text = strings.Join(mp.parts, "\n")
	return in, true
}
