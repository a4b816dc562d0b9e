package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/opentalon/opentalon/core"
)

// work is one queue item being served: the channel its answer goes to,
// the message that answer is delivered in reply to, and the producer of
// the answer. serve owns the rest of the item's life, as net/http's
// server owns a connection and a handler only writes the response.
type work struct {
	id int64
	ch core.Channel
	// in is what the answer replies to: its conversation is where the
	// answer is stored and sent, its message is quoted (a platform's).
	in core.Inbound
	// reaction or firing is the item's own event (EventReaction,
	// EventScheduled).
	reaction *core.Reaction
	firing   *core.Firing
	// behind is set for a command answered aside: the messages it was
	// answered beside.
	behind *core.Behind
	// queued is when the item was taken in (core.CommandRequest.Queued).
	queued time.Time
	log    *slog.Logger
	// produce makes the answer; prev is the streaming draft an earlier
	// attempt left (nil when none). A nil answer posts nothing and ends
	// the item as done; a *droppedError ends it as dropped.
	produce func(ctx context.Context, w *work, prev *core.Reply) (*core.Answer, error)

	// Set by produce: the session the answer belongs to, the stream that
	// showed it while it was written (nil = not streamed), and what to
	// stop once the item is served (a typing indicator).
	session int64
	stream  *stream
	stops   []func()
}

// onEnd has stop called once the item is served, however it ends.
func (w *work) onEnd(stop func()) { w.stops = append(w.stops, stop) }

// end stops the stream (no update of it may come after the apology a
// failure edits in), then what produce asked to stop.
func (w *work) end() {
	w.stream.stop()
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
}

// serve is the one skeleton every queue item runs through: a reply stored
// by an earlier attempt is only delivered again; otherwise the item's
// producer makes the answer, which is stored, the worker slot released,
// and the answer sent. An answer the channel streamed is stored with the
// messages the stream opened, and the delivery edits them to the final
// text.
//
// held receives the record of the last part sent when the store can
// write it with the item's finish (core.SentFinisher).
func (g *Gateway) serve(ctx context.Context, it core.QueueItem, log *slog.Logger, release func(), held **core.PartSent) error {
	w, err := g.workOf(it, log)
	if err != nil || w == nil {
		return err
	}
	if dw, ok := g.store.(core.DeferredWriter); ok {
		// The item's usage rows and the verdict on the previous answer
		// are stored with its reply; what an item that ends without one
		// deferred is stored as it ends.
		d := &core.Deferred{Owner: g.store}
		ctx = core.WithDeferred(ctx, d)
		defer func() {
			if err := dw.WriteDeferred(context.WithoutCancel(ctx), d); err != nil {
				log.Error("store the usage and signals of the item", "err", err)
			}
		}()
	}
	var prev *core.Reply
	if !it.NoReply {
		// An earlier attempt may have stored the answer (the claim says
		// when it did not).
		if prev, err = g.store.ReplyForRequest(ctx, it.ID, it.Conversation); err != nil {
			return err
		}
	}
	if prev != nil && !prev.Streaming {
		if g.pastStop(ctx) {
			return errStopped
		}
		release()
		return undelivered(g.deliver(ctx, w.ch, w.in, prev, nil, held))
	}
	// Ended however the request ends, a panic included.
	defer w.end()
	ans, err := w.produce(ctx, w, prev)
	if g.pastStop(ctx) {
		g.endStopped(ctx, w)
		return errStopped
	}
	if err != nil || ans == nil {
		return err
	}
	sp := w.stream.stop()
	r, err := g.saveReply(ctx, w.ch, it.ID, w.session, w.in.Conversation, ans)
	if err != nil {
		return err
	}
	if w.stream.opened() {
		// The stream's messages are recorded with the reply.
		if r, err = g.store.ReplyForRequest(ctx, it.ID, w.in.Conversation); err != nil {
			return err
		}
	}
	release()
	return undelivered(g.deliver(ctx, w.ch, w.in, r, sp, held))
}

// deliveryError is a failure to send an answer that is stored: the
// platform's trouble, not the answer's. The next attempt only sends what
// is not sent yet.
type deliveryError struct{ err error }

func (e *deliveryError) Error() string { return e.err.Error() }
func (e *deliveryError) Unwrap() error { return e.err }

// undelivered marks err (nil stays nil) as a deliveryError.
func undelivered(err error) error {
	if err == nil {
		return nil
	}
	return &deliveryError{err}
}

// workOf is the work of one queue item by its kind; nil when there is
// nothing to do (a reaction that judges nothing).
func (g *Gateway) workOf(it core.QueueItem, log *slog.Logger) (*work, error) {
	switch it.Kind {
	case core.EventMessage:
		return g.messageWork(it, log)
	case core.EventReaction:
		return g.reactionWork(it, log)
	case core.EventScheduled:
		return g.firingWork(it, log)
	}
	return nil, core.Errorf(core.KindInvalid, "unknown queue item kind %q", it.Kind)
}

// messageWork answers one message through the pipeline. An answer the
// channel streams is shown while it is written.
func (g *Gateway) messageWork(it core.QueueItem, log *slog.Logger) (*work, error) {
	in := *it.Message
	ch, ok := g.channels[in.Conversation.Channel]
	if !ok {
		return nil, core.Errorf(core.KindInvalid, "channel %q is not enabled; enable channels.%s in the config to answer its queued messages", in.Conversation.Channel, in.Conversation.Channel)
	}
	return &work{id: it.ID, ch: ch, in: in, behind: it.Behind, queued: it.CreatedAt, log: log, produce: g.produceMessage}, nil
}

// produceMessage is the producer of a message's answer: an interceptor's
// decision, a command's reply, or the message through the turn pipeline.
func (g *Gateway) produceMessage(ctx context.Context, w *work, prev *core.Reply) (*core.Answer, error) {
	in := w.in
	if ind, ok := w.ch.(core.Indicator); ok && in.Origin == "" {
		w.onEnd(ind.Working(ctx, in))
	}
	var sess core.Session
	var follow *core.FollowUp
	var err error
	if fs, ok := g.store.(core.FollowUpSessions); ok && len(g.interceptors) > 0 {
		// The interceptors' reads come with the session's.
		sess, follow, err = fs.ActiveSessionFollowUp(ctx, in.Conversation)
	} else {
		sess, err = g.store.ActiveSession(ctx, in.Conversation)
	}
	if err != nil {
		return nil, err
	}
	w.session = sess.ID
	to := core.Outbound{Conversation: in.Conversation, ReplyTo: replyTo(in), Meta: in.Meta}
	w.stream = g.streamFor(ctx, w.ch, to, w.id, sess.ID, prev, w.log)
	return g.answerMessage(ctx, core.CommandRequest{RequestID: w.id, In: in, Session: sess, FollowUp: follow, Behind: w.behind, Queued: w.queued}, answering{stream: w.stream}, w.log)
}

// streamFor prepares the stream of an answer (nil when the channel does
// not stream it); draft is the streaming reply an earlier attempt left.
func (g *Gateway) streamFor(ctx context.Context, ch core.Channel, to core.Outbound, requestID, sessionID int64, draft *core.Reply, log *slog.Logger) *stream {
	r := draft
	if r == nil {
		r = &core.Reply{RequestID: requestID, SessionID: sessionID, Conversation: to.Conversation, Streaming: true, CreatedAt: g.now()}
	}
	s := g.newStream(ctx, ch, to, r, log)
	if s == nil && draft != nil {
		// Not streamed this time: the earlier messages are still edited.
		s = &stream{reply: draft, slots: slotsOf(draft)}
	}
	return s
}
