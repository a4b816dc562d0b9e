package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// saveReply stores the answer to a queue item, formatted for the channel,
// with the turn's history entries in one transaction.
func (g *Gateway) saveReply(ctx context.Context, ch Channel, requestID, sessionID int64, conv ConversationKey, ans *Answer) (*Reply, error) {
	r := &Reply{
		RequestID:    requestID,
		SessionID:    sessionID,
		Conversation: conv,
		Text:         ans.Text,
		Parts:        ch.Format(ans.Text),
		Model:        ans.Model,
		TaskType:     ans.TaskType,
		Reason:       ans.Reason,
		Usage:        ans.Usage,
		Metadata:     ans.Metadata,
		CreatedAt:    g.now(),
	}
	r.Sent = make([]string, len(r.Parts))
	var err error
	if r.ID, err = g.store.SaveReply(ctx, r, ans.Messages); err != nil {
		return nil, err
	}
	return r, nil
}

// deliver sends the parts of r not sent yet, recording each as it goes.
// The channel's Send paces itself; it is called outside the workers.
func (g *Gateway) deliver(ctx context.Context, ch Channel, in Inbound, r *Reply) error {
	t0 := g.now()
	defer func() { g.obs.Stage(r.Conversation.Channel, StageDelivery, g.now().Sub(t0)) }()
	for i, part := range r.Parts {
		if i < len(r.Sent) && r.Sent[i] != "" {
			continue
		}
		to := Outbound{Conversation: r.Conversation, ReplyTo: replyTo(in), Meta: in.Meta, Part: i, Parts: len(r.Parts)}
		id, err := ch.Send(ctx, to, part)
		if err != nil {
			return fmt.Errorf("send part %d/%d: %w", i+1, len(r.Parts), err)
		}
		if id == "" {
			id = "-"
		}
		if err := g.store.MarkSent(context.WithoutCancel(ctx), r.ID, i, id); err != nil {
			return err
		}
	}
	return nil
}

// UserMessage is the short text a user sees when their request failed.
func UserMessage(err error) string {
	const pre = "Sorry, I could not answer that: "
	again := "Please try again later."
	if d := RetryAfter(err); d > 0 {
		again = fmt.Sprintf("Please try again in %s.", d.Round(time.Second))
	}
	switch ErrorKind(err) {
	case KindRateLimited:
		if RetryAfter(err) == 0 {
			again = "Please try again in a minute."
		}
		return pre + "the AI provider is rate limiting me. " + again
	case KindAuth:
		return pre + "the AI provider refused my credentials. The operator has been told (see the log)."
	case KindBilling:
		return pre + "the AI provider's quota or credit is used up. The operator has been told (see the log)."
	case KindTimeout:
		return pre + "the AI provider did not answer in time. " + again
	case KindUnavailable:
		return pre + "the AI provider is not answering right now. " + again
	case KindContextTooLong:
		return pre + "the conversation is too long for the model. Send /new to start a fresh one."
	case KindMalformed:
		return pre + "the AI provider sent an answer I could not read. The error is logged; please try again."
	case KindInvalid, KindBadRequest:
		var e *Error
		if errors.As(err, &e) && e.Msg != "" {
			return pre + e.Msg // the cause stays in the log
		}
		return pre + "the request was not valid."
	}
	return pre + "something went wrong on my side. The error is logged; please try again."
}

// DelayMessage is what a user is told once when their answer waits for a
// cooling provider: why, and about when it comes.
func DelayMessage(err error) string {
	why := "the AI provider is busy"
	switch ErrorKind(err) {
	case KindRateLimited:
		why = "the AI provider is rate limiting me"
	case KindTimeout:
		why = "the AI provider is answering too slowly"
	case KindUnavailable:
		why = "the AI provider is not answering right now"
	}
	return fmt.Sprintf("⏳ Your answer is delayed: %s. I will answer in about %s.", why, RetryAfter(err).Round(time.Second))
}
