package core

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Schedule is one scheduled task: when it fires, what it does and where
// its output goes. core/schedule computes its firings; the store keeps it.
type Schedule struct {
	ID int64
	// Source is ScheduleConfig, ScheduleChat or "plugin:<name>".
	Source string
	// Key identifies the schedule within its source across restarts: a
	// config entry's digest, a plugin's schedule id ("" for chat).
	Key string
	// Interval or Cron (five fields) says when it fires.
	Interval time.Duration
	Cron     string
	// Spec is the schedule as it was written, for /schedules.
	Spec string
	// Prompt is answered by the LLM; or Plugin's Action runs with Args;
	// or, for a plugin's own schedule, the plugin is called back.
	Prompt string
	Plugin string
	Action string
	Args   map[string]string
	// Conversation receives the output.
	Conversation ConversationKey
	// Model forces a model for the prompt ("" = the router chooses).
	Model string
	// Timezone is an IANA zone name for Cron.
	Timezone string
	// Missed is MissedSkip or MissedOnce.
	Missed string
	// Creator is the user id that made it with /schedule.
	Creator   string
	CreatedAt time.Time
	// LastFire is the firing time last queued; NextFire the next one.
	LastFire time.Time
	NextFire time.Time
}

// Schedule sources and missed-firing policies.
const (
	ScheduleConfig = "config"
	ScheduleChat   = "chat"
	// MissedSkip drops the firings that fell while the gateway was down;
	// MissedOnce runs one of them when it starts again.
	MissedSkip = "skip"
	MissedOnce = "once"
)

// Firing is one firing of a schedule, queued in its conversation like a
// message (QueueItem.Kind EventScheduled): answered once, also across a
// crash.
type Firing struct {
	ScheduleID int64
	// At is the firing time it stands for.
	At           time.Time
	Source       string
	Key          string
	Conversation ConversationKey
	Prompt       string
	Plugin       string
	Action       string
	Args         map[string]string `json:",omitempty"`
	Model        string
	Creator      string
}

// FiringOf is the firing of s at at.
func FiringOf(s Schedule, at time.Time) Firing {
	return Firing{ScheduleID: s.ID, At: at, Source: s.Source, Key: s.Key, Conversation: s.Conversation,
		Prompt: s.Prompt, Plugin: s.Plugin, Action: s.Action, Args: s.Args, Model: s.Model, Creator: s.Creator}
}

// Inbound is the message a firing stands for in its conversation: its
// prompt from its creator, never a reply to anything.
func (f Firing) Inbound(text string) Inbound {
	return Inbound{
		Conversation: f.Conversation,
		MessageID:    "schedule:" + strconv.FormatInt(f.ScheduleID, 10) + ":" + strconv.FormatInt(f.At.UnixMilli(), 10),
		UserID:       f.Creator,
		UserName:     "schedule #" + strconv.FormatInt(f.ScheduleID, 10),
		Text:         text,
		Mentioned:    true,
		Origin:       OriginSchedule,
		ReceivedAt:   f.At,
	}
}

// FiringResult is what a firing asks the gateway to do.
type FiringResult struct {
	// Prompt is answered through the pipeline (hooks, agent) and the
	// answer posted; Text is posted as it is.
	Prompt string
	Text   string
	// Skip posts nothing; Reason is logged and recorded.
	Skip   bool
	Reason string
}

// FiringRunner does a firing's own work before anything is posted: Lua's
// on_schedule, a plugin action, a plugin's OnSchedule. Without one, only
// prompt firings run. Safe for concurrent use.
type FiringRunner interface {
	RunFiring(ctx context.Context, f Firing) (FiringResult, error)
}

// EnqueueFiring commits a firing to its conversation's queue; a firing
// already queued (same schedule and time) is reported with dup=true and
// not queued again.
func (g *Gateway) EnqueueFiring(ctx context.Context, f Firing) (dup bool, err error) {
	if _, ok := g.channels[f.Conversation.Channel]; !ok {
		return false, Errorf(KindInvalid, "schedule #%d posts to channel %q, which is not enabled; enable channels.%s or change the schedule", f.ScheduleID, f.Conversation.Channel, f.Conversation.Channel)
	}
	item := QueueItem{
		Kind:         EventScheduled,
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
func (g *Gateway) handleFiring(ctx context.Context, it QueueItem, log *slog.Logger, release func()) error {
	if it.Firing == nil {
		return Errorf(KindInvalid, "a schedule row holds no firing")
	}
	f := *it.Firing
	conv := f.Conversation
	ch, ok := g.channels[conv.Channel]
	if !ok {
		return Errorf(KindInvalid, "schedule #%d posts to channel %q, which is not enabled; enable channels.%s in the config", f.ScheduleID, conv.Channel, conv.Channel)
	}
	in := f.Inbound(f.Prompt)
	if r, err := g.store.ReplyForRequest(ctx, it.ID, conv); err != nil {
		return err
	} else if r != nil {
		release()
		return g.deliver(ctx, ch, in, r, nil)
	}
	// A chat schedule runs for the user who made it: once they may no
	// longer talk to the bot here (taken off the allowlist, a pairing
	// denied, the auth provider's no), it does not fire.
	if f.Source == ScheduleChat && f.Creator != "" && !g.MayTalk(ctx, Inbound{Conversation: conv, UserID: f.Creator}) {
		log.Info("scheduled task skipped: its creator may no longer talk to the bot here", "schedule", f.ScheduleID, "creator", f.Creator)
		return &droppedError{reason: fmt.Sprintf("schedule #%d skipped: its creator %s may no longer talk to the bot here", f.ScheduleID, f.Creator)}
	}
	res := FiringResult{Prompt: f.Prompt}
	if g.opts.Firings != nil {
		var err error
		if res, err = g.opts.Firings.RunFiring(ctx, f); err != nil {
			return fmt.Errorf("schedule #%d: %w", f.ScheduleID, err)
		}
	} else if f.Prompt == "" {
		return Errorf(KindInvalid, "schedule #%d runs a plugin, and this gateway runs no plugins", f.ScheduleID)
	}
	sess, err := g.store.ActiveSession(ctx, conv)
	if err != nil {
		return err
	}
	var ans *Answer
	switch {
	case res.Skip:
		return &droppedError{reason: "schedule skipped: " + res.Reason}
	case res.Text != "":
		ans = &Answer{Text: res.Text}
	case res.Prompt != "":
		in.Text = res.Prompt
		a, err := g.runTurn(ctx, CommandRequest{RequestID: it.ID, In: in, Session: sess}, TurnOverride{Text: res.Prompt, Model: f.Model}, answering{}, log)
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
func (g *Gateway) emitFailed(it QueueItem, cause error) {
	if g.opts.Events == nil {
		return
	}
	msg := cause.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	what := "request"
	if it.Kind == EventScheduled && it.Firing != nil {
		what = fmt.Sprintf("schedule #%d", it.Firing.ScheduleID)
	}
	g.opts.Events.Emit(OpsEvent{
		Kind: EventRequestFailed, Subject: it.Conversation.Channel, At: g.now(),
		Message: fmt.Sprintf("%s %d in %s failed for good after %d attempts: %s", what, it.ID, it.Conversation, it.Attempts+1, msg),
		Details: map[string]string{"request": strconv.FormatInt(it.ID, 10), "conversation": it.Conversation.String(), "kind": ErrorKind(cause).String()},
	})
}
