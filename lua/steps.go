package lua

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/opentalon/opentalon/core"
)

// stepCache is the hook steps of one loaded set of scripts.
type stepCache struct {
	scripts *[]*script
	steps   []core.HookStep
}

var _ core.HookSource = (*Engine)(nil)

// Order is a script's place among every hook, gRPC hooks included: the
// number its file name starts with ("20_classify.lua" → 20), else 0.
func Order(file string) int {
	end := strings.IndexFunc(file, func(r rune) bool { return !unicode.IsDigit(r) })
	if end <= 0 {
		return 0
	}
	n, err := strconv.Atoi(file[:end])
	if err != nil {
		return 0
	}
	return n
}

// HookSteps implements core.HookSource: one step per script that
// defines a hook, by Order and then file name; a step's pre-hook is the
// script's filter and then its pre_hook, its post-hook the post_hook.
func (e *Engine) HookSteps() []core.HookStep {
	cur := e.scripts.Load()
	if c := e.steps.Load(); c != nil && c.scripts == cur {
		return c.steps
	}
	var steps []core.HookStep
	for _, s := range *cur {
		st := core.HookStep{Name: "lua:" + s.file, Order: Order(s.file)}
		if s.has(HookFilter) || s.has(HookPre) {
			st.Pre = func(ctx context.Context, in core.HookInput) (core.PreResult, error) {
				return e.preScript(ctx, s, in, core.PreResult{Text: in.Text, Metadata: cloneMeta(in.Metadata)})
			}
		}
		if s.has(HookPost) {
			st.StreamUnsafe = s.unsafe
			st.Post = func(ctx context.Context, in core.HookInput, answer string) (core.PostResult, error) {
				out, answer := e.postScript(ctx, s, in, answer, cloneMeta(in.Metadata))
				return core.PostResult{Text: answer, Metadata: out.metadata}, ctx.Err()
			}
		}
		if st.Pre != nil || st.Post != nil {
			steps = append(steps, st)
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Order < steps[j].Order })
	e.steps.Store(&stepCache{scripts: cur, steps: steps})
	return steps
}

// HasSchedule reports whether a loaded script defines on_schedule.
func (e *Engine) HasSchedule() bool {
	for _, s := range e.current() {
		if s.has(HookSchedule) {
			return true
		}
	}
	return false
}

// OnSchedule runs every script's on_schedule(ctx) for one firing, in
// file-name order, before the firing's own work. ctx.message is prompt
// (the schedule's prompt, "" for a plugin's), and ctx.schedule, ctx.chat,
// ctx.thread and ctx.at describe the firing. A script returns ctx (its
// message is the prompt the next one sees and then the LLM), { drop =
// true, reason = … } to skip this firing, or { reply = "…" } to post that
// text instead. A failing run is logged and skipped, like a hook's.
func (e *Engine) OnSchedule(ctx context.Context, f core.Firing, prompt string) (core.FiringResult, error) {
	in := core.HookInput{In: f.Inbound(prompt), Text: prompt}
	in.In.Meta = map[string]string{"schedule": strconv.FormatInt(f.ScheduleID, 10), "at": strconv.FormatInt(f.At.Unix(), 10)}
	res := core.FiringResult{Prompt: prompt}
	for _, s := range e.current() {
		if !s.has(HookSchedule) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		out, err := e.runHook(ctx, s, HookSchedule, in, res.Prompt, map[string]string{})
		if err != nil {
			continue
		}
		switch {
		case out.drop:
			e.log.Info("firing skipped by a lua script", "script", s.file, "schedule", f.ScheduleID, "reason", out.reason)
			return core.FiringResult{Skip: true, Reason: out.reason}, nil
		case out.reply != "":
			return core.FiringResult{Text: out.reply}, nil
		}
		res.Prompt = out.message
		in.Text = out.message
	}
	return res, nil
}
