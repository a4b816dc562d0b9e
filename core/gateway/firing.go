package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/opentalon/opentalon/core"
)

// EnqueueFiring commits a firing to its conversation's queue; a firing
// already queued (same schedule and time) is reported with dup=true and
// not queued again.
func (g *Gateway) EnqueueFiring(ctx context.Context, f core.Firing) (dup bool, err error) {
	if _, ok := g.channels[f.Conversation.Channel]; !ok {
		return false, core.Errorf(core.KindInvalid, "schedule #%d posts to channel %q, which is not enabled; enable channels.%s or change the schedule", f.ScheduleID, f.Conversation.Channel, f.Conversation.Channel)
	}
	item := core.QueueItem{
		Kind:         core.EventScheduled,
		Conversation: f.Conversation,
		DedupeKey:    fmt.Sprintf("schedule:%d:%d", f.ScheduleID, f.At.UnixMilli()),
		Firing:       &f,
		CreatedAt:    g.now(),
	}
	_, dup, err = g.store.Enqueue(ctx, item)
	if err != nil {
		return false, fmt.Errorf("queue schedule #%d: %w", f.ScheduleID, err)
	}
	if !dup {
		g.poke()
	}
	return dup, nil
}

// handleFiring runs one firing: its own work (FiringRunner), then its
// prompt through the one answer pipeline, or its text as it is; the
// answer is stored and posted to the schedule's conversation like every
// reply.
func (g *Gateway) handleFiring(ctx context.Context, it core.QueueItem, log *slog.Logger, release func()) error {
	if it.Firing == nil {
		return core.Errorf(core.KindInvalid, "a schedule row holds no firing")
	}
	f := *it.Firing
	conv := f.Conversation
	ch, ok := g.channels[conv.Channel]
	if !ok {
		return core.Errorf(core.KindInvalid, "schedule #%d posts to channel %q, which is not enabled; enable channels.%s in the config", f.ScheduleID, conv.Channel, conv.Channel)
	}
	in := f.Inbound(f.Prompt)
	if r, err := g.store.ReplyForRequest(ctx, it.ID, conv); err != nil {
		return err
	} else if r != nil {
		release()
		return g.deliver(ctx, ch, in, r, nil)
	}
	res := core.FiringResult{Prompt: f.Prompt}
	if g.opts.Firings != nil {
		var err error
		if res, err = g.opts.Firings.RunFiring(ctx, f); err != nil {
			return fmt.Errorf("schedule #%d: %w", f.ScheduleID, err)
		}
	} else if f.Prompt == "" {
		return core.Errorf(core.KindInvalid, "schedule #%d runs a plugin, and this gateway runs no plugins", f.ScheduleID)
	}
	sess, err := g.store.ActiveSession(ctx, conv)
	if err != nil {
		return err
	}
	var ans *core.Answer
	switch {
	case res.Skip:
		return &droppedError{reason: "schedule skipped: " + res.Reason}
	case res.Text != "":
		ans = &core.Answer{Text: res.Text}
	case res.Prompt != "":
		in.Text = res.Prompt
		a, err := g.runTurn(ctx, core.CommandRequest{RequestID: it.ID, In: in, Session: sess}, core.TurnOverride{Text: res.Prompt, Model: f.Model}, answering{}, log)
		if err != nil {
			return err
		}
		ans = a
	default:
		return &droppedError{reason: "schedule produced nothing to post"}
	}
	r, err := g.saveReply(ctx, ch, it.ID, sess.ID, conv, ans)
	if err != nil {
		return err
	}
	release()
	log.Info("scheduled task answered", "schedule", f.ScheduleID, "at", f.At.Format(time.RFC3339))
	return g.deliver(ctx, ch, in, r, nil)
}

// emitFailed tells the operator events that a request failed for good.
func (g *Gateway) emitFailed(it core.QueueItem, cause error) {
	if g.opts.Events == nil {
		return
	}
	msg := cause.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	what := "request"
	if it.Kind == core.EventScheduled && it.Firing != nil {
		what = fmt.Sprintf("schedule #%d", it.Firing.ScheduleID)
	}
	g.opts.Events.Emit(core.OpsEvent{
		Kind: core.EventRequestFailed, Subject: it.Conversation.Channel, At: g.now(),
		Message: fmt.Sprintf("%s %d in %s failed for good after %d attempts: %s", what, it.ID, it.Conversation, it.Attempts+1, msg),
		Details: map[string]string{"request": strconv.FormatInt(it.ID, 10), "conversation": it.Conversation.String(), "kind": core.ErrorKind(cause).String()},
	})
}
