package gateway

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// ErrNotAccepting is returned by Accept while the gateway is not running.
var ErrNotAccepting = &core.Error{Kind: core.KindUnavailable, Msg: "gateway is not accepting messages (starting or shutting down)"}

// Accept implements core.Sink.
func (g *Gateway) Accept(ctx context.Context, in core.Inbound) error {
	if !g.isAccepting() {
		return ErrNotAccepting
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.now()
	}
	if ok, err := g.admit(ctx, in); err != nil {
		// The access check reads the database (pairing mode, the
		// channels' default): its outage is the same as the enqueue's.
		return g.notKept(fmt.Errorf("accept %s message %s: %w", in.Conversation.Channel, in.MessageID, err), "message")
	} else if !ok {
		return nil // a refused message is answered (or ignored), not queued
	}
	item := core.QueueItem{
		Kind:         core.EventMessage,
		Conversation: in.Conversation,
		DedupeKey:    in.Conversation.Channel + ":m:" + in.MessageID,
		Message:      &in,
		MaxPending:   g.opts.MaxPending,
	}
	stop := g.isStop(in.Text)
	if stop || g.uncapped(in.Conversation.Channel) {
		// /stop is most wanted when the conversation is full; the
		// console's operator may pipe any number of lines.
		item.MaxPending = 0
	}
	var dup bool
	var err error
	if g.aside(in.Text) {
		dup, err = g.enqueueAside(ctx, item)
	} else {
		dup, err = g.enqueue(ctx, item)
	}
	if errors.Is(err, core.ErrConversationFull) {
		// Not queued on purpose: the platform may be acknowledged.
		g.log.Warn("conversation has too many messages waiting; message not queued", "conv", in.Conversation.String(), "message_id", in.MessageID, "queue.max_pending", g.opts.MaxPending)
		g.tellFull(in)
		return nil
	}
	if err != nil {
		return g.notKept(fmt.Errorf("accept %s message %s: %w", in.Conversation.Channel, in.MessageID, err), "message")
	}
	if dup {
		g.log.Debug("duplicate message dropped", "conv", in.Conversation.String(), "message_id", in.MessageID)
		return nil
	}
	g.log.Debug("message accepted", "conv", in.Conversation.String(), "message_id", in.MessageID)
	if stop {
		g.requestStop(ctx, in.Conversation)
	}
	return nil
}

// notKept is Accept's (React's) error for a message (a reaction) the
// store could not queue.
// When the database is out of reach it says so in words, names it (its
// server, never its credentials) and says the message was not kept: a
// platform redelivers what it was not acknowledged for, but a console
// line is gone and its operator must send it again.
func (g *Gateway) notKept(err error, thing string) error {
	again := map[string]string{"message": "send it again", "reaction": "react again"}
	r, ok := g.store.(reachability)
	if !ok || !r.Unreachable(err) {
		return err
	}
	what := "the database"
	if n, ok := g.store.(interface{ Name() string }); ok && n.Name() != "" {
		what = n.Name() + " (state.postgres.dsn)"
	}
	return &core.Error{Kind: core.KindUnavailable, Msg: what + " is out of reach, so the " + thing + " was not kept: " + again[thing] + " once the database answers (/readyz says ready)", Err: err}
}

// uncapped says channel's messages are not held to queue.max_pending
// (core.Uncapped).
func (g *Gateway) uncapped(channel string) bool {
	u, ok := g.channels[channel].(core.Uncapped)
	return ok && u.Uncapped()
}

// Edit implements core.Sink.
func (g *Gateway) Edit(ctx context.Context, in core.Inbound) (bool, error) {
	return g.store.EditQueued(ctx, in.Conversation.Channel+":m:"+in.MessageID, core.CleanText(in.Text))
}

// React implements core.Sink.
func (g *Gateway) React(ctx context.Context, r core.Reaction) error {
	if !g.isAccepting() {
		return ErrNotAccepting
	}
	if r.At.IsZero() {
		r.At = g.now()
	}
	// A reaction of someone who may not talk to the bot judges nothing.
	if ok, _, err := g.admitted(ctx, core.Inbound{Conversation: r.Conversation, UserID: r.UserID}); err != nil {
		return g.notKept(fmt.Errorf("accept %s reaction: %w", r.Conversation.Channel, err), "reaction")
	} else if !ok {
		return nil
	}
	// A platform may not say in which thread or topic a reaction was
	// made: the judged reply knows, and the reaction joins that
	// conversation's order (a re-answer never runs beside its next message).
	if judged, err := g.store.ReplyByPlatformID(ctx, r.Conversation.Channel, r.MessageID); err == nil && judged != nil {
		r.Conversation = judged.Conversation
	}
	_, err := g.enqueue(ctx, core.QueueItem{
		Kind:         core.EventReaction,
		Conversation: r.Conversation,
		DedupeKey:    r.Conversation.Channel + ":r:" + r.EventID,
		Reaction:     &r,
	})
	if err != nil {
		return g.notKept(fmt.Errorf("accept %s reaction: %w", r.Conversation.Channel, err), "reaction")
	}
	return nil
}

// enqueue is the one way into the queue, for a platform's message or
// reaction, an injected message and a schedule's firing alike: it commits
// item (accepted now), counts a message as accepted and wakes the
// dispatcher. A duplicate (same DedupeKey) is reported with dup=true and
// changes nothing. The store's error is returned as it is
// (core.ErrConversationFull for a message past QueueItem.MaxPending).
//
// While a worker is free and the store can (core.EnqueueClaimer), the
// item is claimed in the same write when its conversation is idle, and
// its work starts at once, while the commit is flushed to the disk: no
// claim of its own, no wait for the dispatcher or the flush (what the
// user sees waits for the flush: awaitDurable).
func (g *Gateway) enqueue(ctx context.Context, item core.QueueItem) (dup bool, err error) {
	g.stamp(&item)
	if ec, ok := g.store.(core.EnqueueClaimer); ok && ec.ClaimsAtEnqueue() {
		if p := g.pool.Load(); p != nil && p.reserve() {
			defer p.done()
			claimed, dup, err := ec.EnqueueClaim(ctx, item, g.now(), func(it core.QueueItem) {
				g.accepted(item)
				g.obs.Stage(item.Conversation.Channel, core.StageQueue, g.now().Sub(item.CreatedAt))
				g.start(p, it)
				// Its work first: this goroutine goes on to the flush.
				// Only while the gateway is otherwise idle: a yield puts
				// this goroutine on the runtime's global run queue, which
				// under load (a garbage collection most) it leaves last,
				// and the next enqueues and the next poll wait for its
				// flush.
				if p.busy() <= yieldBusy {
					runtime.Gosched()
				}
			})
			if claimed {
				// Started; a failed flush is the platform's to redeliver
				// (a duplicate of the item being answered).
				return false, err
			}
			p.unreserve()
			if err != nil || dup {
				return dup, err
			}
			g.accepted(item)
			g.poke()
			return false, nil
		}
	}
	if _, dup, err = g.store.Enqueue(ctx, item); err != nil || dup {
		return dup, err
	}
	g.accepted(item)
	g.poke()
	return false, nil
}

// stamp dates item accepted now and cleans its text and the context
// quoted before it: a NUL byte or bytes that are not UTF-8 (from a
// platform, a plugin's injection, a schedule's prompt) would be refused
// by PostgreSQL when the turn is stored, after the LLM answered.
func (g *Gateway) stamp(item *core.QueueItem) {
	item.CreatedAt = g.now()
	if item.Message != nil {
		item.Message.Text = core.CleanText(item.Message.Text)
		item.Message.Context = core.CleanText(item.Message.Context) // the LLM gets it with the text
	}
	if item.Firing != nil {
		item.Firing.Prompt = core.CleanText(item.Firing.Prompt)
	}
}

// aside says text is a command answered aside (core.Command.Aside).
func (g *Gateway) aside(text string) bool {
	if len(text) < 2 || text[0] != '/' {
		return false
	}
	name, _, ok := core.ParseCommand(text)
	return ok && g.commands.byName[strings.ToLower(name)].Aside
}

// enqueueAside is enqueue for a command answered aside: queued (and
// claimed at once when its conversation is idle) as any message, then
// the conversation's aside commands are claimed out of its order while
// the messages before them only wait (claimAsides).
func (g *Gateway) enqueueAside(ctx context.Context, item core.QueueItem) (dup bool, err error) {
	if dup, err = g.enqueue(ctx, item); err != nil || dup {
		return dup, err
	}
	g.claimAsides(ctx, item.Conversation)
	return false, nil
}

// asideScan is how many queued items of a conversation claimAsides reads.
const asideScan = 50

// claimAsides claims the aside commands queued in conv, oldest first,
// while the conversation's head only waits (a provider cooling down, a
// retry's backoff; core.AsideClaimer), and starts each after the one
// before it (Gateway.asides), so /status answers at once and commands
// sent together answer in their order. It is called when such a command
// is accepted and when a message is put back to wait (a command sent
// while that message was being tried then goes aside too). A command it
// cannot claim (the head runs or is due) waits its turn; one that
// finds no free worker is claimed once one is (retryAsides).
func (g *Gateway) claimAsides(ctx context.Context, conv core.ConversationKey) {
	ac, ok := g.store.(core.AsideClaimer)
	p := g.pool.Load()
	if !ok || p == nil {
		return
	}
	// One at a time, so the chain follows the queue's order.
	g.asideMu.Lock()
	defer g.asideMu.Unlock()
	items, err := ac.QueuedIn(ctx, conv, asideScan)
	if err != nil {
		g.log.Warn("read the queued commands of a conversation; they wait their turn", "conv", conv.String(), "err", err)
		return
	}
	for _, q := range items {
		if q.Kind != core.EventMessage || q.Message == nil || !g.aside(q.Message.Text) {
			continue
		}
		if !p.reserve() {
			// No free worker, or the dispatcher holds the freed ones for
			// queued work: it claims the conversation's asides again
			// once one is free (retryAsides), told now in case it just
			// looked.
			g.mu.Lock()
			g.asideWait[conv.String()] = conv
			g.mu.Unlock()
			g.poke()
			return
		}
		it, claimed, err := ac.ClaimAside(ctx, q.ID, g.now())
		if err != nil || !claimed {
			p.unreserve()
			p.done()
			if err != nil {
				g.log.Warn("a command could not be answered aside; it waits its turn", "request", q.ID, "err", err)
			}
			return
		}
		g.obs.Stage(conv.Channel, core.StageQueue, g.now().Sub(it.CreatedAt))
		key := conv.String()
		done := make(chan struct{})
		g.mu.Lock()
		prev := g.asides[key]
		g.asides[key] = done
		g.mu.Unlock()
		g.startAfter(p, it, prev, func() {
			g.wakeWaiting(it.ID)
			g.mu.Lock()
			if g.asides[key] == done {
				delete(g.asides, key)
			}
			g.mu.Unlock()
			close(done)
			// A command that found no free worker meanwhile.
			g.claimAsides(context.WithoutCancel(ctx), conv)
		})
		p.done()
	}
}

// retryAsides claims again, each in its own goroutine, the aside
// commands of the conversations where one found no free worker
// (Gateway.asideWait). The dispatcher calls it while a worker is free.
func (g *Gateway) retryAsides(ctx context.Context) {
	g.mu.Lock()
	if len(g.asideWait) == 0 {
		g.mu.Unlock()
		return
	}
	convs := g.asideWait
	g.asideWait = map[string]core.ConversationKey{}
	g.mu.Unlock()
	for _, conv := range convs {
		g.side.Add(1)
		go func() {
			defer g.side.Done()
			g.claimAsides(ctx, conv)
		}()
	}
}

// accepted counts an accepted message.
func (g *Gateway) accepted(item core.QueueItem) {
	if item.Kind == core.EventMessage {
		g.obs.Accepted(item.Conversation.Channel)
	}
}

// poke wakes the dispatcher.
func (g *Gateway) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// noticeEvery bounds how often one conversation or user is told the same
// kind of notice (their pairing code, a channel's pairing requests full).
const noticeEvery = time.Minute

// noticeDue reports whether the notice of key may be sent now, and if so
// records that it is (the next one is due noticeEvery later).
func (g *Gateway) noticeDue(key string) bool { return g.noticeDueEvery(key, noticeEvery) }

// noticeDueEvery is noticeDue with the notice of key due every "every".
func (g *Gateway) noticeDueEvery(key string, every time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if next, told := g.notices[key]; told && now.Before(next) {
		return false
	}
	g.notices[key] = now.Add(every)
	if len(g.notices) > 10000 {
		for k, next := range g.notices {
			if !now.Before(next) {
				delete(g.notices, k)
			}
		}
	}
	return true
}

// fullNotices are a sender's refused messages in a conversation waiting
// for their notice while one is being sent.
type fullNotices struct {
	n    int
	last core.Inbound
}

// tellFull tells the user, best effort, that their message was not
// taken, in reply to it, so they know which ones to send again. One
// notice to a sender in a conversation is sent at a time: their messages
// refused meanwhile are told in one notice after it, in reply to the
// last of them, so a flood of messages is not answered by a flood of
// notices (which would also spend the chat's rate limit that answers
// need).
//
// The notice is a courtesy: it goes out after the answers the channel
// has waiting in the conversation (core.Outbound.Notice), and one that
// finds no turn within noticeWait is dropped with a log line, not sent
// late.
func (g *Gateway) tellFull(in core.Inbound) {
	ch, ok := g.channels[in.Conversation.Channel]
	if !ok {
		return
	}
	// By sender: in a group each user is told of their own messages.
	key := in.Conversation.String() + "\x00" + in.UserID
	g.mu.Lock()
	if w, sending := g.full[key]; sending {
		w.n, w.last = w.n+1, in
		g.mu.Unlock()
		return
	}
	g.full[key] = &fullNotices{}
	g.mu.Unlock()
	g.side.Add(1)
	go func() {
		defer g.side.Done()
		n := 0
		for {
			ctx, cancel := context.WithTimeout(context.Background(), noticeWait)
			err := sendAs(ctx, ch, in, fullText(in.Private, n), true)
			cancel()
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				g.log.Info("notice of a message not taken dropped: it could not be sent in time (answers waiting in the conversation go first)", "conv", in.Conversation.String(), "message_id", in.MessageID, "waited", noticeWait)
			case err != nil:
				g.log.Warn("send a notice", "conv", in.Conversation.String(), "err", err)
			}
			g.mu.Lock()
			w := g.full[key]
			if w.n == 0 {
				delete(g.full, key)
				g.mu.Unlock()
				return
			}
			n, in, w.n = w.n, w.last, 0
			g.mu.Unlock()
		}
	}()
}

// noticeWait bounds how long a notice of a message not taken waits for
// its turn to be sent.
const noticeWait = 30 * time.Second

// fullText is the notice of a message not taken, after n more notices of
// the sender (0 for the first). queue.max_pending counts everyone's
// messages in a conversation: in a group or channel the ones the bot is
// still working on may be other people's.
func fullText(private bool, n int) string {
	if private {
		switch n {
		case 0:
			return "I am still working on your earlier messages, so I did not take this one. Please send it again once I have answered them."
		case 1:
			return "I am still working on your earlier messages, so I did not take this one either. Please send it again once I have answered them."
		}
		return fmt.Sprintf("I am still working on your earlier messages, so I did not take your last %d messages either, up to this one. Please send them again once I have answered.", n)
	}
	switch n {
	case 0:
		return "I am still working on earlier messages in this chat, so I did not take this one. Please send it again in a little while."
	case 1:
		return "I am still working on earlier messages in this chat, so I did not take this one either. Please send it again in a little while."
	}
	return fmt.Sprintf("I am still working on earlier messages in this chat, so I did not take your last %d messages either, up to this one. Please send them again in a little while.", n)
}

// notify sends a notice of the gateway's own in reply to in, best effort,
// without holding up the caller.
func (g *Gateway) notify(in core.Inbound, text string) {
	ch, ok := g.channels[in.Conversation.Channel]
	if !ok {
		return
	}
	g.side.Add(1)
	go func() {
		defer g.side.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g.sendText(ctx, ch, in, text)
	}()
}

// sendText sends a short text of the gateway's own (a notice, an
// apology) in reply to in, best effort.
func (g *Gateway) sendText(ctx context.Context, ch core.Channel, in core.Inbound, text string) {
	if err := send(ctx, ch, in, text); err != nil {
		g.log.Warn("send a notice", "conv", in.Conversation.String(), "err", err)
	}
}

// Post sends a text of the gateway's own to a conversation of one of its
// channels (a chat notification sink's event), outside the queue: it is
// not stored, and a failure is returned, not retried.
func (g *Gateway) Post(ctx context.Context, conv core.ConversationKey, text string) error {
	ch, ok := g.channels[conv.Channel]
	if !ok {
		return fmt.Errorf("channel %s is not enabled", conv.Channel)
	}
	return send(ctx, ch, core.Inbound{Conversation: conv}, text)
}

// send is the one way a text that is not a stored reply reaches a
// channel: formatted and split for it, each part in order, in reply to in
// (quoting nothing when in is no platform's message).
func send(ctx context.Context, ch core.Channel, in core.Inbound, text string) error {
	return sendAs(ctx, ch, in, text, false)
}

// sendAs is send, of a notice (core.Outbound.Notice) when notice is true.
func sendAs(ctx context.Context, ch core.Channel, in core.Inbound, text string, notice bool) error {
	parts := ch.Format(text)
	for i, part := range parts {
		if _, err := ch.Send(ctx, core.Outbound{Conversation: in.Conversation, ReplyTo: replyTo(in), Meta: in.Meta, Part: i, Parts: len(parts), Notice: notice}, part); err != nil {
			return err
		}
	}
	return nil
}
