package schedule_test

import (
	"context"
	"errors"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/schedule"
)

// fakeScripts is Lua's on_schedule: it answers with res when it has a
// schedule hook.
type fakeScripts struct {
	has bool
	res core.FiringResult
	got string // the prompt it saw
}

func (s *fakeScripts) HasSchedule() bool { return s.has }
func (s *fakeScripts) OnSchedule(_ context.Context, _ core.Firing, prompt string) (core.FiringResult, error) {
	s.got = prompt
	return s.res, nil
}

type fakeActions struct{ err error }

func (a fakeActions) RunScheduled(_ context.Context, f core.Firing) (string, error) {
	return "ran " + f.Plugin + "." + f.Action, a.err
}

type fakeCallbacks struct{}

func (fakeCallbacks) OnSchedule(_ context.Context, plugin, id string, _ core.Firing) (core.FiringResult, error) {
	return core.FiringResult{Text: plugin + " called back for " + id}, nil
}

func TestRunnerDecidesWhatAFiringDoes(t *testing.T) {
	prompt := core.Firing{ScheduleID: 1, Source: core.ScheduleConfig, Prompt: "summarize"}
	action := core.Firing{ScheduleID: 2, Source: core.ScheduleConfig, Plugin: "jira", Action: "report"}
	own := core.Firing{ScheduleID: 3, Source: core.OriginPlugin + "digest", Plugin: "digest", Key: "daily"}
	broken := errors.New("plugin down")
	tests := []struct {
		name    string
		scripts *fakeScripts
		actions schedule.Actions
		f       core.Firing
		want    core.FiringResult
		wantErr error
	}{
		{"a prompt is answered", nil, fakeActions{}, prompt, core.FiringResult{Prompt: "summarize"}, nil},
		{"scripts without on_schedule are not asked", &fakeScripts{res: core.FiringResult{Skip: true}}, fakeActions{}, prompt, core.FiringResult{Prompt: "summarize"}, nil},
		{"a script rewrites the prompt", &fakeScripts{has: true, res: core.FiringResult{Prompt: "summarize briefly"}}, fakeActions{}, prompt, core.FiringResult{Prompt: "summarize briefly"}, nil},
		{"a script skips the firing", &fakeScripts{has: true, res: core.FiringResult{Skip: true, Reason: "holiday"}}, fakeActions{}, action, core.FiringResult{Skip: true, Reason: "holiday"}, nil},
		{"a script posts a text", &fakeScripts{has: true, res: core.FiringResult{Text: "done"}}, fakeActions{}, action, core.FiringResult{Text: "done"}, nil},
		{"an action's output is posted", nil, fakeActions{}, action, core.FiringResult{Text: "ran jira.report"}, nil},
		{"an action's failure is the firing's", nil, fakeActions{err: broken}, action, core.FiringResult{}, broken},
		{"a plugin's own schedule calls it back", nil, fakeActions{}, own, core.FiringResult{Text: "digest called back for daily"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := schedule.Runner{Actions: tt.actions, Callbacks: fakeCallbacks{}}
			if tt.scripts != nil {
				r.Scripts = tt.scripts
			}
			got, err := r.RunFiring(context.Background(), tt.f)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("RunFiring = %+v, %v; want %+v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := (schedule.Runner{}).RunFiring(context.Background(), action); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("an action without plugins: %v; want KindInvalid", err)
	}
}
