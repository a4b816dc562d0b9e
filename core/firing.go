package core

import (
	"context"
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
	Creator string
	// Private says it was made in a one-to-one chat with the bot
	// (Inbound.Private of its /schedule): its firings recall the
	// creator's memories as that chat does (core.MemoryPlace). False for
	// a group's, the config's and plugins' schedules.
	Private   bool
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
	// Private is the schedule's (Schedule.Private); false for a firing
	// queued before the field.
	Private bool `json:",omitempty"`
}

// FiringOf is the firing of s at at.
func FiringOf(s Schedule, at time.Time) Firing {
	return Firing{ScheduleID: s.ID, At: at, Source: s.Source, Key: s.Key, Conversation: s.Conversation,
		Prompt: s.Prompt, Plugin: s.Plugin, Action: s.Action, Args: s.Args, Model: s.Model, Creator: s.Creator, Private: s.Private}
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
		Private:      f.Private,
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
