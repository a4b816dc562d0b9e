package core

import (
	"context"
	"log/slog"
	"math"
)

// HookStep is one hook of a hook source: one Lua script, one plugin's
// hooks. Steps of every source run interleaved by Order in the one answer
// pipeline.
type HookStep struct {
	// Name says whose hook it is, for the log ("lua:10_filter.lua",
	// "plugin:moderate").
	Name string
	// Order places the step: lowest first.
	Order int
	// Pre runs before the agent with the text and metadata the previous
	// step left; nil = the step has no pre-hook. Its result follows the
	// Hooks.Pre contract (rewrite, metadata, drop, answer directly).
	Pre func(ctx context.Context, in HookInput) (PreResult, error)
	// Post runs after the agent on the answer the previous step left; nil
	// = the step has no post-hook.
	Post func(ctx context.Context, in HookInput, answer string) (string, error)
	// StreamUnsafe marks a post step that must see the whole answer
	// before the user sees any of it (a redaction hook): while the step
	// is there, answers are not streamed (see StreamSafety).
	StreamUnsafe bool
}

// HookSource is a set of hook steps that may change while the gateway
// runs (a Lua script reloaded, a plugin restarted). Safe for concurrent
// use.
type HookSource interface {
	// HookSteps returns the current steps sorted by Order (stable). It is
	// called for every answer: return a cached slice, and never change a
	// slice once returned.
	HookSteps() []HookStep
}

// OrderedHooks runs the steps of several sources as one core.Hooks,
// interleaved by Order; at equal Order a source listed earlier runs
// first. A step that fails is logged and skipped: the message goes on as
// the previous step left it. Only the end of the request's context stops
// the chain.
type OrderedHooks struct {
	sources []HookSource
	log     *slog.Logger
	obs     Observer
}

// Observe makes every skipped failure a HookFailed of o (metrics); call
// it before the hooks are used.
func (h *OrderedHooks) Observe(o Observer) { h.obs = o }

func (h *OrderedHooks) failed(in HookInput, s Stage) {
	if h.obs != nil {
		h.obs.HookFailed(in.In.Conversation.Channel, s)
	}
}

var (
	_ Hooks        = (*OrderedHooks)(nil)
	_ StreamSafety = (*OrderedHooks)(nil)
)

// StreamSafe implements StreamSafety: answers are not streamed while any
// source has a post step marked StreamUnsafe.
func (h *OrderedHooks) StreamSafe(HookInput) bool {
	safe := true
	h.each(func(st HookStep) bool {
		if st.Post != nil && st.StreamUnsafe {
			safe = false
		}
		return safe
	})
	return safe
}

// NewOrderedHooks combines sources (nil entries are left out).
func NewOrderedHooks(log *slog.Logger, sources ...HookSource) *OrderedHooks {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &OrderedHooks{log: log.With("component", "hooks")}
	for _, s := range sources {
		if s != nil {
			h.sources = append(h.sources, s)
		}
	}
	return h
}

// HooksAt makes a plain Hooks one step of a source, at order (tests run
// their hooks last with math.MaxInt).
func HooksAt(name string, order int, h Hooks) HookSource {
	return fixedSteps{{Name: name, Order: order, Pre: h.Pre, Post: h.Post}}
}

// LastOrder is the order of a step that runs after every other.
const LastOrder = math.MaxInt

type fixedSteps []HookStep

func (f fixedSteps) HookSteps() []HookStep { return f }

// each calls fn with every step in order, merging the sources' sorted
// steps without allocating; fn returns false to stop.
func (h *OrderedHooks) each(fn func(HookStep) bool) {
	var buf [4][]HookStep
	lists := buf[:0]
	for _, s := range h.sources {
		if st := s.HookSteps(); len(st) > 0 {
			lists = append(lists, st)
		}
	}
	for {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || l[0].Order < lists[best][0].Order) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		st := lists[best][0]
		lists[best] = lists[best][1:]
		if !fn(st) {
			return
		}
	}
}

// Pre implements Hooks: each pre step sees the text and metadata the
// previous one left; the first drop or direct answer ends the chain.
func (h *OrderedHooks) Pre(ctx context.Context, in HookInput) (PreResult, error) {
	res := PreResult{Text: in.Text, Metadata: in.Metadata}
	var ctxErr error
	h.each(func(st HookStep) bool {
		if st.Pre == nil {
			return true
		}
		if ctxErr = ctx.Err(); ctxErr != nil {
			return false
		}
		r, err := st.Pre(ctx, in)
		if err != nil {
			if ctxErr = ctx.Err(); ctxErr != nil {
				return false
			}
			h.log.Warn("pre-hook failed; the message goes on without its change", "hook", st.Name, "err", err, "conv", in.In.Conversation.String())
			h.failed(in, StagePreHooks)
			return true
		}
		if r.Drop || r.Reply != "" {
			res = r
			return false
		}
		if r.Text != "" {
			res.Text = r.Text
		}
		if r.Metadata != nil {
			res.Metadata = r.Metadata
		}
		in.Text, in.Metadata = res.Text, res.Metadata
		return true
	})
	return res, ctxErr
}

// Post implements Hooks: each post step sees the answer the previous one
// left.
func (h *OrderedHooks) Post(ctx context.Context, in HookInput, answer string) (string, error) {
	var ctxErr error
	h.each(func(st HookStep) bool {
		if st.Post == nil {
			return true
		}
		if ctxErr = ctx.Err(); ctxErr != nil {
			return false
		}
		out, err := st.Post(ctx, in, answer)
		if err != nil {
			if ctxErr = ctx.Err(); ctxErr != nil {
				return false
			}
			h.log.Warn("post-hook failed; the answer goes on without its change", "hook", st.Name, "err", err, "conv", in.In.Conversation.String())
			h.failed(in, StagePostHooks)
			return true
		}
		if out != "" {
			answer = out
		}
		return true
	})
	return answer, ctxErr
}
