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
// not queued again. A firing for a channel this gateway does not run is
// refused, unless other gateways share the queue (Options.SharedQueue):
// the scheduler's leader may be a replica without that channel.
func (g *Gateway) EnqueueFiring(ctx context.Context, f core.Firing) (dup bool, err error) {
	if _, ok := g.channels[f.Conversation.Channel]; !ok && !g.opts.SharedQueue {
		return false, core.Errorf(core.KindInvalid, "schedule #%d posts to channel %q, which is not enabled; enable channels.%s or change the schedule", f.ScheduleID, f.Conversation.Channel, f.Conversation.Channel)
	}
	dup, err = g.enqueue(ctx, core.QueueItem{
		Kind:         core.EventScheduled,
		Conversation: f.Conversation,
		DedupeKey:    fmt.Sprintf("schedule:%d:%d", f.ScheduleID, f.At.UnixMilli()),
		Firing:       &f,
	})
	if err != nil {
		return false, fmt.Errorf("queue schedule #%d: %w", f.ScheduleID, err)
	}
	return dup, nil
}

// firingWork runs one firing: its own work (core.FiringRunner), then its
// prompt through the one answer pipeline, or its text as it is; the
// answer is stored and posted to the schedule's conversation like every
// reply.
func (g *Gateway) firingWork(it core.QueueItem, log *slog.Logger) (*work, error) {
	if it.Firing == nil {
		return nil, core.Errorf(core.KindInvalid, "a schedule row holds no firing")
	}
	f := it.Firing
	conv := f.Conversation
	ch, ok := g.channels[conv.Channel]
	if !ok {
		return nil, core.Errorf(core.KindInvalid, "schedule #%d posts to channel %q, which is not enabled; enable channels.%s in the config", f.ScheduleID, conv.Channel, conv.Channel)
	}
	return &work{id: it.ID, ch: ch, in: f.Inbound(f.Prompt), firing: f, log: log, produce: g.produceFiring}, nil
}

// produceFiring is the producer of a firing's answer.
func (g *Gateway) produceFiring(ctx context.Context, w *work, _ *core.Reply) (*core.Answer, error) {
	f := *w.firing
	// A chat schedule runs for the user who made it: once they may no
	// longer talk to the bot here (taken off the allowlist, a pairing
	// denied, the auth provider's no), it does not fire.
	if f.Source == core.ScheduleChat && f.Creator != "" && !g.MayTalk(ctx, core.Inbound{Conversation: f.Conversation, UserID: f.Creator}) {
		w.log.Info("scheduled task skipped: its creator may no longer talk to the bot here", "schedule", f.ScheduleID, "creator", f.Creator)
		return nil, &droppedError{reason: fmt.Sprintf("schedule #%d skipped: its creator %s may no longer talk to the bot here", f.ScheduleID, f.Creator)}
	}
	res := core.FiringResult{Prompt: f.Prompt}
	if g.opts.Firings != nil {
		var err error
		if res, err = g.opts.Firings.RunFiring(ctx, f); err != nil {
			return nil, fmt.Errorf("schedule #%d: %w", f.ScheduleID, err)
		}
	} else if f.Prompt == "" {
		return nil, core.Errorf(core.KindInvalid, "schedule #%d runs a plugin, and this gateway runs no plugins", f.ScheduleID)
	}
	sess, err := g.store.ActiveSession(ctx, f.Conversation)
	if err != nil {
		return nil, err
	}
	w.session = sess.ID
	var ans *core.Answer
	switch {
	case res.Skip:
		return nil, &droppedError{reason: "schedule skipped: " + res.Reason}
	case res.Text != "":
		ans = &core.Answer{Text: res.Text}
	case res.Prompt != "":
		in := w.in
		in.Text = res.Prompt
		if ans, err = g.runTurn(ctx, core.CommandRequest{RequestID: w.id, In: in, Session: sess}, core.TurnOverride{Text: res.Prompt, Model: f.Model}, answering{}, w.log); err != nil {
			return nil, err
		}
	default:
		return nil, &droppedError{reason: "schedule produced nothing to post"}
	}
	w.log.Info("scheduled task answered", "schedule", f.ScheduleID, "at", f.At.Format(time.RFC3339))
	return ans, nil
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
