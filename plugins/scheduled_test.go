package plugins

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func TestScheduleDeclDecodes(t *testing.T) {
	tests := []struct {
		d        ScheduleDecl
		interval time.Duration
		spec     string
		err      bool
	}{
		{ScheduleDecl{ID: "a", Interval: "90m", Channel: "slack", Chat: "C1"}, 90 * time.Minute, "every 1h30m0s", false},
		{ScheduleDecl{ID: "b", Cron: "0 9 * * 1-5", Channel: "slack", Chat: "C1", Thread: "t"}, 0, "cron 0 9 * * 1-5", false},
		{ScheduleDecl{ID: "c", Interval: "daily", Channel: "slack", Chat: "C1"}, 0, "", true},
	}
	for _, tt := range tests {
		sc, err := tt.d.Schedule()
		if (err != nil) != tt.err {
			t.Errorf("%s: err = %v; want error %v", tt.d.ID, err, tt.err)
			continue
		}
		if tt.err {
			continue
		}
		if sc.Key != tt.d.ID || sc.Interval != tt.interval || sc.Spec != tt.spec || sc.Cron != tt.d.Cron ||
			sc.Conversation.Channel != tt.d.Channel || sc.Conversation.Chat != tt.d.Chat || sc.Conversation.Thread != tt.d.Thread {
			t.Errorf("%s: schedule = %+v", tt.d.ID, sc)
		}
	}
}

// reportExec answers the "report" action with out, or fails.
type reportExec struct {
	out, errText string
	err          error
}

func (e reportExec) Execute(_ context.Context, c core.ToolCall) (core.ToolResult, error) {
	return core.ToolResult{CallID: c.ID, Content: e.out, Error: e.errText}, e.err
}

func TestRunScheduled(t *testing.T) {
	f := core.Firing{ScheduleID: 7, At: time.UnixMilli(1000), Plugin: "jira", Action: "report", Args: map[string]string{"project": "OPS"}}
	tests := []struct {
		name string
		exec reportExec
		f    core.Firing
		want string
		kind core.Kind
	}{
		{"output is cleaned and cut to the limit", reportExec{out: "3 op\x1ben incidents and more"}, f, "3 open inc\n[truncated: the plugin returned 25 bytes; only the first 10 are shown]", core.KindUnknown},
		{"a missing required arg", reportExec{}, core.Firing{ScheduleID: 7, Plugin: "jira", Action: "report"}, "", core.KindInvalid},
		{"an action that is not there", reportExec{}, core.Firing{ScheduleID: 7, Plugin: "jira", Action: "nope"}, "", core.KindUnavailable},
		{"the action's error", reportExec{errText: "token expired"}, f, "", core.KindUnavailable},
		{"the call failed", reportExec{err: errors.New("connection reset")}, f, "", core.KindUnavailable},
		{"output that is not text", reportExec{out: "\xff\xfe"}, f, "", core.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry(func(string) Limits { return Limits{Timeout: time.Second, MaxResponseBytes: 10} })
			c := Capability{Name: "jira", Actions: []Action{{Name: "report", Parameters: []Parameter{{Name: "project", Required: true}}}}}
			if err := r.Register(c, tt.exec); err != nil {
				t.Fatal(err)
			}
			got, err := r.RunScheduled(context.Background(), tt.f)
			if got != tt.want || core.ErrorKind(err) != tt.kind {
				t.Fatalf("RunScheduled = %q, %v (kind %v); want %q, kind %v", got, err, core.ErrorKind(err), tt.want, tt.kind)
			}
		})
	}
}
