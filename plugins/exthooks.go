package plugins

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// Bounds of the metadata a hook returns (as for Lua hooks).
const (
	maxHookMetaEntries = 256
	maxHookMetaBytes   = 64 << 10
)

// hookStep makes one declared hook a step of the pipeline: a call with
// the hook's timeout whose failure (an error, a timeout, output that is
// not text) the pipeline logs and skips.
func (x *Extensions) hookStep(p *extPlugin, h Hook) core.HookStep {
	name := p.cap.Name
	timeout := x.o.HookTimeout
	bound := fmt.Sprintf("%s, plugins.tools.hooks.timeout", timeout)
	if h.Timeout > 0 && h.Timeout < timeout {
		timeout = h.Timeout
		bound = fmt.Sprintf("%s, the hook's own timeout in its capability, under plugins.tools.hooks.timeout", timeout)
	}
	st := core.HookStep{Name: "plugin:" + name, Order: h.Order}
	client := p.hooks
	if h.Stage == StagePre {
		st.Pre = func(ctx context.Context, in core.HookInput) (core.PreResult, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			resp, err := client.PreHook(ctx, hookRequest(in, in.Text, ""))
			if err != nil {
				return core.PreResult{}, fmt.Errorf("%w (hook timeout %s)", callError(name, "pre hook", err), bound)
			}
			if err := late(ctx, name, "pre hook", bound); err != nil {
				return core.PreResult{}, err
			}
			return x.preResult(name, in, resp)
		}
		return st
	}
	st.StreamUnsafe = h.StreamUnsafe
	st.Post = func(ctx context.Context, in core.HookInput, answer string) (core.PostResult, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp, err := client.PostHook(ctx, hookRequest(in, answer, in.Text))
		if err != nil {
			return core.PostResult{}, fmt.Errorf("%w (hook timeout %s)", callError(name, "post hook", err), bound)
		}
		if err := late(ctx, name, "post hook", bound); err != nil {
			return core.PostResult{}, err
		}
		if resp.GetDrop() || resp.GetReply() != "" {
			x.log.Warn("a post hook cannot drop or answer; its drop or reply is ignored", "plugin", name)
		}
		res := core.PostResult{Text: answer, Metadata: x.keptMetadata(name, in.Metadata, resp.GetMetadata())}
		if resp.GetText() != "" {
			if res.Text, err = x.text(name, resp.GetText(), false); err != nil {
				return core.PostResult{}, err
			}
		}
		return res, nil
	}
	return st
}

// late is the timeout error of a hook call whose answer came when its
// deadline had passed: gRPC returns an answer that arrives together
// with the deadline (a loaded machine notices its own deadline late),
// and a hook that timed out is skipped whatever it answered. bound is
// the timeout and the setting it comes from.
func late(ctx context.Context, plugin, what, bound string) error {
	dl, ok := ctx.Deadline()
	if ctx.Err() == nil && (!ok || time.Now().Before(dl)) {
		return nil
	}
	return &core.Error{Kind: core.KindTimeout, Msg: fmt.Sprintf("plugin %s: %s answered after its timeout (%s)", plugin, what, bound)}
}

func hookRequest(in core.HookInput, text, question string) *pluginpb.HookRequest {
	c := in.In.Conversation
	return &pluginpb.HookRequest{Text: text, Metadata: in.Metadata, Channel: c.Channel, Chat: c.Chat, Thread: c.Thread,
		UserId: in.In.UserID, UserName: in.In.UserName, SessionId: in.Session.ID, Question: question}
}

// text checks a hook's text and bounds it; forLLM also sanitizes it
// (a pre-hook's text is what the LLM answers).
func (x *Extensions) text(plugin, s string, forLLM bool) (string, error) {
	if err := guard.CheckText(s); err != nil {
		return "", fmt.Errorf("plugin %s: hook text %v", plugin, err)
	}
	s, cut := guard.Truncate(guard.Clean(s), x.o.MaxHookBytes)
	if cut {
		x.log.Warn("hook text cut to the size limit", "plugin", plugin, "bytes", x.o.MaxHookBytes)
	}
	if forLLM {
		s = x.o.Sanitizer.Sanitize(s)
	}
	return s, nil
}

// hookMetadata is the metadata after a hook added md to have (nil when md
// is empty: unchanged); what the hook wrote passes the sanitizer, and the
// whole is bounded.
func (x *Extensions) hookMetadata(plugin string, have, md map[string]string) (map[string]string, error) {
	if len(md) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(have)+len(md))
	maps.Copy(out, have)
	for k, v := range md {
		ck, err := x.text(plugin, k, true)
		if err != nil {
			return nil, err
		}
		cv, err := x.text(plugin, v, true)
		if err != nil {
			return nil, err
		}
		out[ck] = cv
	}
	size := 0
	for k, v := range out {
		size += len(k) + len(v)
	}
	if len(out) > maxHookMetaEntries || size > maxHookMetaBytes {
		return nil, fmt.Errorf("plugin %s: hook metadata holds more than %d entries or %d bytes", plugin, maxHookMetaEntries, maxHookMetaBytes)
	}
	return out, nil
}

// keptMetadata is hookMetadata with its refusal logged: the metadata is
// left as it was (nil) and the hook's text still counts, so a redacting
// hook's work is not undone by a bad metadata entry.
func (x *Extensions) keptMetadata(plugin string, have, md map[string]string) map[string]string {
	out, err := x.hookMetadata(plugin, have, md)
	if err != nil {
		x.log.Warn("hook metadata refused; the hook's text is kept", "plugin", plugin, "err", err)
		return nil
	}
	return out
}

// preResult turns a pre hook's answer into the pipeline's contract:
// its text and metadata pass the sanitizer before the LLM sees them.
func (x *Extensions) preResult(plugin string, in core.HookInput, resp *pluginpb.HookResponse) (core.PreResult, error) {
	res := core.PreResult{Text: in.Text, Metadata: in.Metadata}
	if md := x.keptMetadata(plugin, in.Metadata, resp.GetMetadata()); md != nil {
		res.Metadata = md
	}
	if resp.GetDrop() {
		res.Drop, res.Reason = true, resp.GetReason()
		if res.Reason == "" {
			res.Reason = "by plugin " + plugin
		}
	}
	if r := resp.GetReply(); r != "" {
		reply, err := x.text(plugin, r, false)
		if err != nil {
			return res, err
		}
		res.Reply = reply
		if res.Reason == "" {
			res.Reason = "answered by plugin " + plugin
		}
	}
	if t := resp.GetText(); t != "" && !res.Drop && res.Reply == "" {
		text, err := x.text(plugin, t, true)
		if err != nil {
			return res, err
		}
		res.Text = text
	}
	return res, nil
}
