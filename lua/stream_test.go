package lua

import (
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestStreamSafeFollowsTheScripts(t *testing.T) {
	safe := startEngine(t, map[string]string{
		"10_tag.lua": `function post_hook(ctx) ctx.message = ctx.message .. "!" return ctx end`,
	}, nil)
	if !safe.StreamSafe(core.HookInput{}) {
		t.Fatal("a post_hook that did not declare stream_safe = false made answers unstreamable")
	}
	unsafe := startEngine(t, map[string]string{
		"10_tag.lua":    `function post_hook(ctx) return ctx end`,
		"20_redact.lua": "stream_safe = false\nfunction post_hook(ctx) ctx.message = ctx.message:gsub('%d%d%d%d', '####') return ctx end",
	}, nil)
	if unsafe.StreamSafe(core.HookInput{}) {
		t.Fatal("a redaction post_hook with stream_safe = false let answers stream")
	}
	preOnly := startEngine(t, map[string]string{
		"10_pre.lua": "stream_safe = false\nfunction pre_hook(ctx) return ctx end",
	}, nil)
	if !preOnly.StreamSafe(core.HookInput{}) {
		t.Fatal("stream_safe = false without a post_hook stopped streaming; only post-hooks see answers")
	}
}
