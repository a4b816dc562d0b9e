package gateway

import (
	"context"
	"log/slog"

	"github.com/opentalon/opentalon/core"
)

// reactionWork turns a reaction on one of the bot's replies into a
// quality signal and lets the reaction interceptors decide whether to
// answer again; reactions on anything else are ignored (nil work).
func (g *Gateway) reactionWork(it core.QueueItem, log *slog.Logger) (*work, error) {
	re := it.Reaction
	if re.Polarity == core.Neutral {
		return nil, nil
	}
	ch, ok := g.channels[re.Conversation.Channel]
	if !ok {
		return nil, nil
	}
	to := core.Inbound{Conversation: re.Conversation, MessageID: re.MessageID, UserID: re.UserID, ReceivedAt: re.At}
	return &work{id: it.ID, ch: ch, in: to, reaction: re, log: log, produce: g.produceReaction}, nil
}

// produceReaction is the producer of a reaction: it records the signal
// and, for a rejection an interceptor takes, makes the new answer.
func (g *Gateway) produceReaction(ctx context.Context, w *work, _ *core.Reply) (*core.Answer, error) {
	r := w.reaction
	judged, err := g.store.ReplyByPlatformID(ctx, r.Conversation.Channel, r.MessageID)
	if err != nil || judged == nil {
		return nil, err
	}
	// The judged reply knows its conversation precisely (a platform may
	// not say in which thread or topic a reaction was made).
	w.in.Conversation = judged.Conversation
	p, weight := r.Polarity, 1.0
	if !r.Added {
		// Taking a reaction back takes its judgement back: the same
		// polarity with a negative weight, which the router subtracts
		// (a 👎 taken back is not a 👍).
		weight = -1
	}
	// Keyed by the queue item: a retried item records it once.
	if g.opts.Signals != nil {
		if err := g.opts.Signals.RecordSignal(ctx, core.Signal{
			Kind: core.SignalReaction, Polarity: p, ReplyID: judged.ID, Model: judged.Model,
			TaskType: judged.TaskType, UserID: r.UserID, Weight: weight, At: r.At, RequestID: w.id,
		}); err != nil {
			return nil, err
		}
	}
	if p != core.Negative || !r.Added {
		return nil, nil
	}
	// A platform does not say whether a reaction's chat is private; the
	// message the judged reply answered does. A re-answer is then given
	// as that chat's answers are (a private chat's: no group line, the
	// private memories).
	private, err := g.askedPrivately(ctx, judged)
	if err != nil {
		return nil, err
	}
	w.in.Private = private
	for _, ic := range g.interceptors {
		ri, ok := ic.(core.ReactionInterceptor)
		if !ok {
			continue
		}
		sess, err := g.store.ActiveSession(ctx, judged.Conversation)
		if err != nil || sess.ID != judged.SessionID {
			return nil, err // a reply of an ended session is not re-answered
		}
		d, err := ri.InterceptReaction(ctx, *r, judged, sess)
		if err != nil || !d.Taken() {
			return nil, err
		}
		w.session = sess.ID
		return g.decide(ctx, core.CommandRequest{RequestID: w.id, In: w.in, Session: sess}, d, answering{}, w.log)
	}
	return nil, nil
}

// maxReactionHops bounds the 👎 re-answers askedPrivately follows back to
// the message that started them.
const maxReactionHops = 16

// askedPrivately says whether the message judged answers was sent in a
// private chat, as its request's queue item says. A re-answer made for a
// 👎 answers the reaction's request: the reply that reaction judged is
// followed back, up to the message (or schedule firing) that started it.
// Unknown (the item pruned, a store without the capability) is false.
func (g *Gateway) askedPrivately(ctx context.Context, judged *core.Reply) (bool, error) {
	sr, ok := g.store.(requestSender)
	if !ok {
		return false, nil
	}
	req := judged.RequestID
	for range maxReactionHops {
		if req == 0 {
			return false, nil
		}
		asked, ok, err := sr.RequestSender(ctx, req)
		if err != nil || !ok {
			return false, err
		}
		if asked.MessageID != "" || asked.ReplyTo == "" {
			return asked.Private, nil
		}
		// A reaction's request: the reply it judged.
		prev, err := g.store.ReplyByPlatformID(ctx, asked.Conversation.Channel, asked.ReplyTo)
		if err != nil || prev == nil {
			return false, err
		}
		req = prev.RequestID
	}
	return false, nil
}

// requestSender is the optional store capability that says who sent a
// request (store.DB): the message a reply answered.
type requestSender interface {
	RequestSender(ctx context.Context, requestID int64) (core.Inbound, bool, error)
}
