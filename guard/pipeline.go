package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Executor runs one call in a plugin. It returns an error when the call
// could not be made or did not finish (transport failure, crash,
// deadline); a plugin-reported failure is a result with Error set.
type Executor interface {
	Execute(ctx context.Context, call core.ToolCall) (core.ToolResult, error)
}

// Target is what the registry knows about one plugin action.
type Target struct {
	Exec Executor
	Spec core.ToolSpec
	// Timeout bounds one call (0 = DefaultTimeout).
	Timeout time.Duration
	// MaxResponseBytes caps the content (0 = DefaultMaxResponseBytes).
	MaxResponseBytes int
}

// Resolver finds the target of a call; ok=false when the plugin or the
// action is not registered. It must be safe for concurrent use.
type Resolver interface {
	Resolve(plugin, action string) (t Target, ok bool)
}

// Defaults used when a Target leaves a limit at zero.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 64 * 1024
)

// Pipeline runs tool calls through every guard step. It is built once
// and safe for concurrent use.
type Pipeline struct {
	resolver  Resolver
	sanitizer *Sanitizer
	log       *slog.Logger
	obs       Observer
}

// Observer is told what the guard removed from plugin results, for
// metrics: "truncated" (over the size limit), "sanitized" (a pattern was
// replaced) or "rejected" (the result failed validation). It must return
// at once.
type Observer interface {
	Removed(kind string)
}

// SetObserver sets the Observer; call it before the pipeline is used.
func (p *Pipeline) SetObserver(o Observer) { p.obs = o }

func (p *Pipeline) removed(kind string) {
	if p.obs != nil {
		p.obs.Removed(kind)
	}
}

// New assembles a pipeline. A nil logger discards.
func New(r Resolver, s *Sanitizer, log *slog.Logger) *Pipeline {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if s == nil {
		s, _ = NewSanitizer(nil)
	}
	return &Pipeline{resolver: r, sanitizer: s, log: log.With("component", "guard")}
}

// Run executes call and returns the result the LLM may see: Content is a
// [plugin_output] block, or Error says what went wrong (itself sanitized
// and escaped when it came from the plugin). Run never returns a raw
// plugin result and never panics on what the plugin sent.
func (p *Pipeline) Run(ctx context.Context, call core.ToolCall) core.ToolResult {
	t, ok := p.resolver.Resolve(call.Plugin, call.Action)
	if !ok {
		return core.ToolResult{CallID: call.ID, Error: fmt.Sprintf("unknown tool %s.%s: it is not offered; use one of the listed tools", call.Plugin, call.Action)}
	}
	if missing := missingArgs(t.Spec, call.Args); len(missing) > 0 {
		return core.ToolResult{CallID: call.ID, Error: fmt.Sprintf("tool %s.%s is missing required argument(s) %v; call it again with them", call.Plugin, call.Action, missing)}
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	limit := t.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := t.Exec.Execute(cctx, call)
	log := p.log.With("plugin", call.Plugin, "action", call.Action, "call_id", call.ID)
	if err != nil {
		switch {
		case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(cctx.Err(), context.DeadlineExceeded)):
			log.Warn("plugin call timed out", "timeout", timeout)
			return core.ToolResult{CallID: call.ID, Error: fmt.Sprintf("plugin %s did not answer within %s (plugins.tools.overrides.%s.timeout)", call.Plugin, timeout, call.Plugin)}
		case ctx.Err() != nil:
			return core.ToolResult{CallID: call.ID, Error: "the call was cancelled"}
		default:
			log.Warn("plugin call failed", "err", err)
			return core.ToolResult{CallID: call.ID, Error: fmt.Sprintf("plugin %s failed to run the call", call.Plugin)}
		}
	}
	return p.Check(call, res, limit)
}

// Check applies the post-execution steps to a raw result: size (cut with
// a notice), encoding (invalid UTF-8, NUL or binary output is rejected),
// clean (control, bidi-override and tag characters stripped), sanitize
// (every spelling of a forbidden shape neutralized), validate, and
// exactly one [plugin_output] block around the plugin's text.
func (p *Pipeline) Check(call core.ToolCall, res core.ToolResult, limit int) core.ToolResult {
	var cut bool
	res.Content, cut = Truncate(res.Content, limit)
	if cut {
		p.log.Warn("plugin output truncated", "plugin", call.Plugin, "action", call.Action, "call_id", call.ID, "limit", limit)
		p.removed("truncated")
	}
	res.Error, _ = Truncate(res.Error, limit)
	reject := func(err error) core.ToolResult {
		p.log.Warn("plugin result rejected", "plugin", call.Plugin, "action", call.Action, "call_id", call.ID, "err", err)
		p.removed("rejected")
		return core.ToolResult{CallID: call.ID, Error: GenericError}
	}
	if res.CallID != call.ID {
		return reject(fmt.Errorf("result call id %q does not match the call id %q", res.CallID, call.ID))
	}
	// cleanText leaves valid UTF-8 without NUL, control, bidi-override or
	// tag characters; Sanitize only removes text or inserts ASCII.
	content, err := cleanText(res.Content)
	if err != nil {
		return reject(fmt.Errorf("result content %w", err))
	}
	perr, err := cleanText(res.Error)
	if err != nil {
		return reject(fmt.Errorf("result error %w", err))
	}
	content, perr = p.sanitizer.Sanitize(content), p.sanitizer.Sanitize(perr)
	if content != res.Content || perr != res.Error {
		p.log.Info("plugin output cleaned or sanitized", "plugin", call.Plugin, "action", call.Action, "call_id", call.ID)
		p.removed("sanitized")
	}
	// One block holds all the plugin's text: its error, then its output.
	out := core.ToolResult{CallID: call.ID}
	if perr == "" && len(res.Files) > 0 {
		var line string
		out.Files, line = p.checkFiles(call, res.Files)
		if line = p.sanitizer.Sanitize(line); line != "" && content != "" {
			content = strings.TrimRight(content, "\n") + "\n\n" + line
		} else if line != "" {
			content = line
		}
	}
	switch {
	case perr != "" && content != "":
		out.Error = "the plugin reported an error: " + wrapEscaped(perr+"\n\n"+content)
	case perr != "":
		out.Error = "the plugin reported an error: " + wrapEscaped(perr)
	default:
		out.Content = wrapEscaped(content)
	}
	return out
}

// CheckOutput runs text derived from a call's result (the answer of its
// post_process LLM call) through the same steps as a plugin result, with
// the plugin's response limit.
func (p *Pipeline) CheckOutput(call core.ToolCall, text string) core.ToolResult {
	limit := DefaultMaxResponseBytes
	if t, ok := p.resolver.Resolve(call.Plugin, call.Action); ok && t.MaxResponseBytes > 0 {
		limit = t.MaxResponseBytes
	}
	return p.Check(call, core.ToolResult{CallID: call.ID, Content: text}, limit)
}

// Sanitizer returns the pipeline's sanitizer.
func (p *Pipeline) Sanitizer() *Sanitizer { return p.sanitizer }

func missingArgs(spec core.ToolSpec, args map[string]string) []string {
	var missing []string
	for _, p := range spec.Params {
		if p.Required {
			if _, ok := args[p.Name]; !ok {
				missing = append(missing, p.Name)
			}
		}
	}
	return missing
}

// ForLLM renders a guarded result as the content of a tool message.
func ForLLM(r core.ToolResult) string {
	switch {
	case r.Error != "" && r.Content != "":
		return "Error: " + r.Error + "\n" + r.Content
	case r.Error != "":
		return "Error: " + r.Error
	}
	return r.Content
}
