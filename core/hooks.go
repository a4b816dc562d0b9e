package core

import (
	"context"
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
	// Post runs after the agent on the answer, and with the metadata, the
	// previous step left; nil = the step has no post-hook.
	Post func(ctx context.Context, in HookInput, answer string) (PostResult, error)
	// StreamUnsafe marks a post step that must see the whole answer
	// before the user sees any of it (a redaction hook): while the step
	// is there, answers are not streamed (see StreamSafety).
	StreamUnsafe bool
	// Required marks a step whose error fails the request, as the error
	// of a core.Hooks run alone does; the error of any other step is
	// logged and the step skipped.
	Required bool
}

// PostResult is what a post step leaves for the steps after it: the
// answer ("" = unchanged) and the metadata (nil = unchanged).
type PostResult struct {
	Text     string
	Metadata map[string]string
}

// HookSource is a set of hook steps that may change while the gateway
// runs (a Lua script reloaded, a plugin restarted). A source that also
// implements StreamSafety is asked before an answer is streamed. Safe for
// concurrent use.
type HookSource interface {
	// HookSteps returns the current steps sorted by Order (stable). It is
	// called for every answer: return a cached slice, and never change a
	// slice once returned.
	HookSteps() []HookStep
}
