package plugins

import (
	"context"
	"fmt"
	"strings"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
)

// RunScheduled runs a schedule's plugin action (the firing's Plugin,
// Action and Args) with the plugin's timeout and returns its output as
// the text to post: checked, cleaned and cut to the plugin's
// max_response_bytes. A plugin that is not running, or an action that
// failed, is KindUnavailable (the firing is retried); missing required
// args are KindInvalid.
func (r *Registry) RunScheduled(ctx context.Context, f core.Firing) (string, error) {
	t, ok := r.Resolve(f.Plugin, f.Action)
	if !ok {
		return "", &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("plugin %s is not running or has no action %s", f.Plugin, f.Action)}
	}
	var missing []string
	for _, p := range t.Spec.Params {
		if p.Required && f.Args[p.Name] == "" {
			missing = append(missing, p.Name)
		}
	}
	if len(missing) > 0 {
		return "", core.Errorf(core.KindInvalid, "schedule #%d: %s.%s needs args %s", f.ScheduleID, f.Plugin, f.Action, strings.Join(missing, ", "))
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = guard.DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := t.Exec.Execute(cctx, core.ToolCall{ID: fmt.Sprintf("schedule-%d-%d", f.ScheduleID, f.At.UnixMilli()), Plugin: f.Plugin, Action: f.Action, Args: f.Args})
	if err != nil {
		return "", &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("plugin %s: %s failed", f.Plugin, f.Action), Err: err}
	}
	if res.Error != "" {
		return "", &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("plugin %s: %s: %s", f.Plugin, f.Action, guard.Clean(res.Error))}
	}
	if err := guard.CheckText(res.Content); err != nil {
		return "", &core.Error{Kind: core.KindMalformed, Msg: fmt.Sprintf("plugin %s: %s returned output that %v", f.Plugin, f.Action, err)}
	}
	text, _ := guard.Truncate(guard.Clean(res.Content), max(t.MaxResponseBytes, 1))
	return text, nil
}
