package schedule

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Commands are /schedule, /schedules and /unschedule.
func (s *Scheduler) Commands() []core.Command {
	return []core.Command{
		{CommandInfo: core.CommandInfo{Name: "schedule", Usage: "/schedule <when> <what>", Description: "Answer a prompt here on a schedule (every weekday at 9:00 …)"}, Run: s.cmdSchedule},
		{CommandInfo: core.CommandInfo{Name: "schedules", Usage: "/schedules", Description: "List the schedules of this conversation"}, Run: s.cmdSchedules, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "unschedule", Usage: "/unschedule <id>", Description: "Remove a schedule (its creator or an admin)"}, Run: s.cmdUnschedule},
	}
}

func (s *Scheduler) cmdSchedule(ctx context.Context, req core.CommandRequest) (string, error) {
	if req.In.Origin != "" {
		return "Schedules are made by people in the chat.", nil
	}
	if strings.TrimSpace(req.Args) == "" {
		return Usage, nil
	}
	sp, what, err := ParseSpec(req.Args)
	if err != nil {
		return "I could not read that schedule: " + err.Error() + ".\n\n" + Usage, nil
	}
	if sp.Interval > 0 && sp.Interval < s.o.MinInterval {
		return fmt.Sprintf("Every %s is too often: the shortest interval in chat is %s.\n\n%s", sp.Interval, s.o.MinInterval, Usage), nil
	}
	n := 0
	for _, sc := range s.Schedules() {
		if sc.Source == core.ScheduleChat && sc.Conversation == req.In.Conversation {
			n++
		}
	}
	if n >= s.o.MaxPerConversation {
		return fmt.Sprintf("This conversation has %d schedules already; remove one with /unschedule <id> first.", n), nil
	}
	sc, err := s.Add(ctx, core.Schedule{
		Source: core.ScheduleChat, Interval: sp.Interval, Cron: sp.Cron, Spec: sp.Text, Timezone: sp.Timezone,
		Prompt: what, Conversation: req.In.Conversation, Missed: core.MissedSkip, Creator: req.In.UserID,
		Private: req.In.Private,
	})
	if core.ErrorKind(err) == core.KindInvalid {
		return "I could not read that schedule: " + err.Error() + ".\n\n" + Usage, nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Scheduled #%d: %s — next %s. /unschedule %d removes it.", sc.ID, sc.Spec, s.when(sc.NextFire, sc.Timezone), sc.ID), nil
}

// when renders a firing time in the schedule's zone.
func (s *Scheduler) when(t time.Time, zone string) string {
	loc, err := LoadZone(zone, s.o.Location)
	if err != nil {
		loc = s.o.Location
	}
	return t.In(loc).Format("Mon 2 Jan 15:04 MST")
}

func (s *Scheduler) cmdSchedules(_ context.Context, req core.CommandRequest) (string, error) {
	all := strings.EqualFold(strings.TrimSpace(req.Args), "all")
	if all && !req.Admin {
		return "Only an admin can list every schedule of this channel; /schedules lists this conversation's.", nil
	}
	var b strings.Builder
	for _, sc := range s.Schedules() {
		// An admin is the admin of one channel: "all" is that channel's.
		if !all && sc.Conversation != req.In.Conversation || all && sc.Conversation.Channel != req.In.Conversation.Channel {
			continue
		}
		what := sc.Prompt
		if what == "" && sc.Action != "" {
			what = "runs " + sc.Plugin + "." + sc.Action
		} else if what == "" {
			what = "calls plugin " + sc.Plugin
		}
		if r := []rune(what); len(r) > 60 {
			what = string(r[:60]) + "…"
		}
		spec := sc.Spec
		if spec == "" {
			spec = describe(sc)
		}
		fmt.Fprintf(&b, "\n#%d %s — next %s — %s (%s", sc.ID, spec, s.when(sc.NextFire, sc.Timezone), what, origin(sc))
		if all {
			fmt.Fprintf(&b, ", in %s", sc.Conversation)
		}
		b.WriteString(")")
	}
	if b.Len() == 0 {
		return "No schedules here. Make one with /schedule <when> <what>, e.g. /schedule every weekday at 9:00 summarize yesterday's open incidents.", nil
	}
	return "Schedules:" + b.String(), nil
}

// describe is the timing of a schedule that has no spec text.
func describe(sc core.Schedule) string {
	if sc.Cron != "" {
		return "cron " + sc.Cron
	}
	return "every " + Every(sc.Interval)
}

func origin(sc core.Schedule) string {
	switch {
	case sc.Source == core.ScheduleConfig:
		return "from the config"
	case strings.HasPrefix(sc.Source, core.OriginPlugin):
		return "from plugin " + strings.TrimPrefix(sc.Source, core.OriginPlugin)
	case sc.Creator != "":
		return "by " + sc.Creator
	}
	return "from chat"
}

func (s *Scheduler) cmdUnschedule(ctx context.Context, req core.CommandRequest) (string, error) {
	if req.In.Origin != "" {
		// An injected message's user id is whatever its plugin says.
		return "Schedules are removed by people in the chat.", nil
	}
	arg := strings.TrimPrefix(strings.TrimSpace(req.Args), "#")
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return "Usage: /unschedule <id> — the number /schedules shows, e.g. /unschedule 3", nil
	}
	var sc *core.Schedule
	for _, x := range s.Schedules() {
		if x.ID == id {
			sc = &x
		}
	}
	// An admin reaches the schedules of the channel they are an admin of,
	// not another platform's.
	if sc == nil || sc.Conversation != req.In.Conversation && !(req.Admin && sc.Conversation.Channel == req.In.Conversation.Channel) {
		return fmt.Sprintf("There is no schedule #%d in this conversation (/schedules lists them).", id), nil
	}
	switch {
	case sc.Source == core.ScheduleConfig:
		return fmt.Sprintf("#%d comes from the config file (schedules:); remove it there and restart.", id), nil
	case sc.Source != core.ScheduleChat:
		return fmt.Sprintf("#%d belongs to plugin %s; it goes when the plugin stops declaring it.", id, sc.Plugin), nil
	case !req.Admin && (req.In.UserID == "" || sc.Creator != req.In.UserID):
		return fmt.Sprintf("Only the creator of #%d or an admin of this %s bot can remove it.", id, req.In.Conversation.Channel), nil
	}
	if err := s.Remove(ctx, id); err != nil {
		if core.ErrorKind(err) == core.KindNotFound {
			return fmt.Sprintf("There is no schedule #%d.", id), nil
		}
		return "", err
	}
	return fmt.Sprintf("Removed #%d (%s).", id, sc.Spec), nil
}
