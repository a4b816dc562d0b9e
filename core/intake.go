package core

import (
	"context"
	"fmt"
)

// ErrNotAccepting is returned by Accept while the gateway is not running.
var ErrNotAccepting = &Error{Kind: KindUnavailable, Msg: "gateway is not accepting messages (starting or shutting down)"}

// Accept implements Sink.
func (g *Gateway) Accept(ctx context.Context, in Inbound) error {
	if !g.isAccepting() {
		return ErrNotAccepting
	}
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.now()
	}
	item := QueueItem{
		Kind:         EventMessage,
		Conversation: in.Conversation,
		DedupeKey:    in.Conversation.Channel + ":m:" + in.MessageID,
		Message:      &in,
		CreatedAt:    g.now(),
	}
	_, dup, err := g.store.Enqueue(ctx, item)
	if err != nil {
		return fmt.Errorf("accept %s message %s: %w", in.Conversation.Channel, in.MessageID, err)
	}
	if dup {
		g.log.Debug("duplicate message dropped", "conv", in.Conversation.String(), "message_id", in.MessageID)
		return nil
	}
	g.poke()
	return nil
}

// Edit implements Sink.
func (g *Gateway) Edit(ctx context.Context, in Inbound) (bool, error) {
	return g.store.EditQueued(ctx, in.Conversation.Channel+":m:"+in.MessageID, in.Text)
}

// React implements Sink.
func (g *Gateway) React(ctx context.Context, r Reaction) error {
	if !g.isAccepting() {
		return ErrNotAccepting
	}
	if r.At.IsZero() {
		r.At = g.now()
	}
	item := QueueItem{
		Kind:         EventReaction,
		Conversation: r.Conversation,
		DedupeKey:    r.Conversation.Channel + ":r:" + r.EventID,
		Reaction:     &r,
		CreatedAt:    g.now(),
	}
	_, dup, err := g.store.Enqueue(ctx, item)
	if err != nil {
		return fmt.Errorf("accept %s reaction: %w", r.Conversation.Channel, err)
	}
	if !dup {
		g.poke()
	}
	return nil
}

// poke wakes the dispatcher.
func (g *Gateway) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}
