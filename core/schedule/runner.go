package schedule

import (
	"context"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Scripts run the Lua scripts' on_schedule before a firing's own work
// (lua.Engine).
type Scripts interface {
	// HasSchedule reports whether any script defines on_schedule.
	HasSchedule() bool
	// OnSchedule runs them for f; prompt is the firing's prompt so far.
	OnSchedule(ctx context.Context, f core.Firing, prompt string) (core.FiringResult, error)
}

// Actions run a schedule's plugin action and return its output as the
// text to post (plugins.Registry).
type Actions interface {
	RunScheduled(ctx context.Context, f core.Firing) (string, error)
}

// Callbacks call a plugin back for a firing of a schedule it declared
// (plugins.Extensions).
type Callbacks interface {
	OnSchedule(ctx context.Context, plugin, id string, f core.Firing) (core.FiringResult, error)
}

// Runner decides what a firing does before anything is posted: the Lua
// scripts' on_schedule first (they may skip the firing, post a text, or
// change its prompt); then a schedule's plugin action, whose output is
// posted; or, for a plugin's own schedule, the plugin's OnSchedule;
// otherwise the prompt is answered. A nil part is left out. It
// implements core.FiringRunner.
type Runner struct {
	Scripts   Scripts
	Actions   Actions
	Callbacks Callbacks
}

var _ core.FiringRunner = Runner{}

// RunFiring implements core.FiringRunner.
func (r Runner) RunFiring(ctx context.Context, f core.Firing) (core.FiringResult, error) {
	prompt := f.Prompt
	if r.Scripts != nil && r.Scripts.HasSchedule() {
		res, err := r.Scripts.OnSchedule(ctx, f, prompt)
		if err != nil || res.Skip || res.Text != "" {
			return res, err
		}
		prompt = res.Prompt
	}
	switch {
	case f.Action != "":
		if r.Actions == nil {
			return core.FiringResult{}, core.Errorf(core.KindInvalid, "schedule #%d runs %s.%s, and no plugins run here", f.ScheduleID, f.Plugin, f.Action)
		}
		text, err := r.Actions.RunScheduled(ctx, f)
		if err != nil {
			return core.FiringResult{}, err
		}
		return core.FiringResult{Text: text}, nil
	case strings.HasPrefix(f.Source, core.OriginPlugin):
		if r.Callbacks == nil {
			return core.FiringResult{}, core.Errorf(core.KindInvalid, "schedule #%d belongs to plugin %s, and no plugins run here", f.ScheduleID, f.Plugin)
		}
		return r.Callbacks.OnSchedule(ctx, f.Plugin, f.Key, f)
	}
	return core.FiringResult{Prompt: prompt}, nil
}
