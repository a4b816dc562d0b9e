package core

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// errReplyStreaming defers a reaction on a reply still being streamed;
// streamingWait is how long it waits before it looks again.
var errReplyStreaming = errors.New("the reply is still being streamed")

const streamingWait = 2 * time.Second

// handleReaction turns a reaction on one of the bot's replies into a
// quality signal and lets the reaction interceptors decide whether to
// answer again; reactions on anything else are ignored.
func (g *Gateway) handleReaction(ctx context.Context, it QueueItem, log *slog.Logger, release func()) error {
	re := it.Reaction
	if re.Polarity == Neutral {
		return nil
	}
	ch, ok := g.channels[re.Conversation.Channel]
	if !ok {
		return nil
	}
	to := Inbound{Conversation: re.Conversation, MessageID: re.MessageID, UserID: re.UserID, ReceivedAt: re.At}
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
	if judged.Streaming {
		// The answer is still being written (a reaction may name only the
		// chat of a threaded answer, another conversation of the queue):
		// the reaction waits for it, and is judged against the finished
		// reply. A draft older than the longest wait was never finished.
		if g.now().Add(streamingWait).Sub(judged.CreatedAt) > g.opts.MaxWait {
			log.Info("a reaction on an answer that was never finished is ignored", "reply", judged.ID)
			return nil
		}
		return &Error{Kind: KindUnavailable, Msg: "the reply reacted to is still being written", Err: errReplyStreaming, RetryAfter: streamingWait}
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
		if err := g.opts.Signals.RecordSignal(ctx, Signal{
			Kind: SignalReaction, Polarity: p, ReplyID: judged.ID, Model: judged.Model,
			TaskType: judged.TaskType, UserID: re.UserID, Weight: 1, At: re.At, RequestID: it.ID,
		}); err != nil {
			return err
		}
	}
	if p != Negative || !re.Added {
		return nil
	}
	for _, ic := range g.interceptors {
		ri, ok := ic.(ReactionInterceptor)
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
		ans, err := g.decide(ctx, CommandRequest{RequestID: it.ID, In: to, Session: sess}, d, answering{}, log)
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
