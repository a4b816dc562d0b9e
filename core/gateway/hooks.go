package gateway

import (
	"context"
	"log/slog"
	"math"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// OrderedHooks runs the steps of several sources as one core.Hooks,
// interleaved by Order; at equal Order a source listed earlier runs
// first. A step that fails is logged and skipped: the message goes on as
// the previous step left it. Only the end of the request's context, or
// the error of a Required step, stops the chain. It is the one hook
// combinator: every source of hooks (Lua, hook plugins, a plain
// core.Hooks through HooksAt) runs through it.
type OrderedHooks struct {
	sources []core.HookSource
	log     *slog.Logger
	obs     core.Observer
}

// Observe makes every skipped failure a HookFailed of o (metrics); call
// it before the hooks are used.
func (h *OrderedHooks) Observe(o core.Observer) { h.obs = o }

func (h *OrderedHooks) failed(in core.HookInput, s core.Stage) {
	if h.obs != nil {
		h.obs.HookFailed(in.In.Conversation.Channel, s)
	}
}

var (
	_ core.Hooks        = (*OrderedHooks)(nil)
	_ core.StreamSafety = (*OrderedHooks)(nil)
)

// StreamSafe implements core.StreamSafety: answers are not streamed while
// any source has a post step marked StreamUnsafe, or a source that is a
// core.StreamSafety says in is not safe.
func (h *OrderedHooks) StreamSafe(in core.HookInput) bool {
	for _, s := range h.sources {
		if ss, ok := s.(core.StreamSafety); ok && !ss.StreamSafe(in) {
			return false
		}
	}
	safe := true
	h.each(func(st core.HookStep) bool {
		if st.Post != nil && st.StreamUnsafe {
			safe = false
		}
		return safe
	})
	return safe
}

// NewOrderedHooks combines sources (nil entries are left out).
func NewOrderedHooks(log *slog.Logger, sources ...core.HookSource) *OrderedHooks {
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

// HooksAt makes a plain Hooks one Required step of a source, at order
// (tests run their hooks last with LastOrder): its error fails the
// request as it does when the Hooks run alone, and the source is a
// core.StreamSafety when h is one.
func HooksAt(name string, order int, h core.Hooks) core.HookSource {
	post := func(ctx context.Context, in core.HookInput, answer string) (core.PostResult, error) {
		text, err := h.Post(ctx, in, answer)
		return core.PostResult{Text: text}, err
	}
	return plainHooks{steps: []core.HookStep{{Name: name, Order: order, Pre: h.Pre, Post: post, Required: true}}, h: h}
}

// LastOrder is the order of a step that runs after every other.
const LastOrder = math.MaxInt

// plainHooks is a plain Hooks as a source of one step.
type plainHooks struct {
	steps []core.HookStep
	h     core.Hooks
}

func (p plainHooks) HookSteps() []core.HookStep { return p.steps }

// StreamSafe implements core.StreamSafety: what h says, when it says.
func (p plainHooks) StreamSafe(in core.HookInput) bool {
	if s, ok := p.h.(core.StreamSafety); ok {
		return s.StreamSafe(in)
	}
	return true
}

// each calls fn with every step in order, merging the sources' sorted
// steps without allocating; fn returns false to stop.
func (h *OrderedHooks) each(fn func(core.HookStep) bool) {
	var buf [4][]core.HookStep
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

// Pre implements core.Hooks: each pre step sees the text and metadata the
// previous one left; the first drop or direct answer ends the chain, and
// so does the error of a Required step, which is returned.
func (h *OrderedHooks) Pre(ctx context.Context, in core.HookInput) (core.PreResult, error) {
	res := core.PreResult{Text: in.Text, Metadata: in.Metadata}
	var stop error
	h.each(func(st core.HookStep) bool {
		if st.Pre == nil {
			return true
		}
		if stop = ctx.Err(); stop != nil {
			return false
		}
		r, err := st.Pre(ctx, in)
		if err != nil {
			if stop = ctx.Err(); stop != nil {
				return false
			}
			if st.Required {
				stop = err
				return false
			}
			h.log.Warn("pre-hook failed; the message goes on without its change", "hook", st.Name, "err", err, "conv", in.In.Conversation.String())
			h.failed(in, core.StagePreHooks)
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
	return res, stop
}

// Post implements core.Hooks: each post step sees the answer and the
// metadata the previous one left; the error of a Required step ends the
// chain and is returned.
func (h *OrderedHooks) Post(ctx context.Context, in core.HookInput, answer string) (string, error) {
	var stop error
	h.each(func(st core.HookStep) bool {
		if st.Post == nil {
			return true
		}
		if stop = ctx.Err(); stop != nil {
			return false
		}
		out, err := st.Post(ctx, in, answer)
		if err != nil {
			if stop = ctx.Err(); stop != nil {
				return false
			}
			if st.Required {
				stop = err
				return false
			}
			h.log.Warn("post-hook failed; the answer goes on without its change", "hook", st.Name, "err", err, "conv", in.In.Conversation.String())
			h.failed(in, core.StagePostHooks)
			return true
		}
		switch {
		case strings.TrimSpace(out.Text) != "":
			answer = out.Text
		case out.Text != "":
			// An answer of only spaces would be sent as nothing (or
			// refused by the platform) and recorded as answered.
			h.log.Warn("post-hook returned only whitespace; the answer goes on without its change (return \"\" to leave it unchanged)", "hook", st.Name, "conv", in.In.Conversation.String())
		}
		if out.Metadata != nil {
			in.Metadata = out.Metadata
		}
		return true
	})
	return answer, stop
}
