package gateway

import (
	"context"
	"log/slog"

	"github.com/opentalon/opentalon/core"
)

// handleReaction turns a reaction on one of the bot's replies into a
// quality signal and lets the reaction interceptors decide whether to
// answer again; reactions on anything else are ignored.
func (g *Gateway) handleReaction(ctx context.Context, it core.QueueItem, log *slog.Logger, release func()) error {
	re := it.Reaction
	if re.Polarity == core.Neutral {
		return nil
	}
	ch, ok := g.channels[re.Conversation.Channel]
	if !ok {
		return nil
	}
	to := core.Inbound{Conversation: re.Conversation, MessageID: re.MessageID, UserID: re.UserID, ReceivedAt: re.At}
	// An answer stored by an earlier attempt is only delivered again.
	if prev, err := g.store.ReplyForRequest(ctx, it.ID, it.Conversation); err != nil || prev != nil {
		if err != nil {
			return err
		}
		release()
		return g.deliver(ctx, ch, to, prev, nil)
	}
	judged, err := g.store.ReplyByPlatformID(ctx, re.Conversation.Channel, re.MessageID)
	if err != nil || judged == nil {
		return err
	}
	// The judged reply knows its conversation precisely (a platform may
	// not say in which thread or topic a reaction was made).
	to.Conversation = judged.Conversation
	p := re.Polarity
	if !re.Added {
		// Taking a reaction back cancels its judgement.
		p = -p
	}
	// Keyed by the queue item: a retried item records it once.
	if g.opts.Signals != nil {
		if err := g.opts.Signals.RecordSignal(ctx, core.Signal{
			Kind: core.SignalReaction, Polarity: p, ReplyID: judged.ID, Model: judged.Model,
			TaskType: judged.TaskType, UserID: re.UserID, Weight: 1, At: re.At, RequestID: it.ID,
		}); err != nil {
			return err
		}
	}
	if p != core.Negative || !re.Added {
		return nil
	}
	for _, ic := range g.interceptors {
		ri, ok := ic.(core.ReactionInterceptor)
		if !ok {
			continue
		}
		sess, err := g.store.ActiveSession(ctx, judged.Conversation)
		if err != nil || sess.ID != judged.SessionID {
			return err // a reply of an ended session is not re-answered
		}
		d, err := ri.InterceptReaction(ctx, *re, judged, sess)
		if err != nil || !d.Taken() {
			return err
		}
		ans, err := g.decide(ctx, core.CommandRequest{RequestID: it.ID, In: to, Session: sess}, d, answering{}, log)
		if err != nil {
			return err
		}
		r, err := g.saveReply(ctx, ch, it.ID, sess.ID, to.Conversation, ans)
		if err != nil {
			return err
		}
		release()
		return g.deliver(ctx, ch, to, r, nil)
	}
	return nil
}
