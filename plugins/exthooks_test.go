package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
	"google.golang.org/grpc"
)

// lateHooks answers each call only once its deadline passed: what a
// gRPC call returns when the plugin's answer and the deadline arrive
// together and the answer wins, which a loaded machine makes happen over
// the real wire (cmd/opentalon's TestE2EPluginHooks saw "too late").
type lateHooks struct{}

func (lateHooks) PreHook(ctx context.Context, _ *pluginpb.HookRequest, _ ...grpc.CallOption) (*pluginpb.HookResponse, error) {
	<-ctx.Done()
	return &pluginpb.HookResponse{Text: "too late"}, nil
}

func (lateHooks) PostHook(ctx context.Context, _ *pluginpb.HookRequest, _ ...grpc.CallOption) (*pluginpb.HookResponse, error) {
	<-ctx.Done()
	return &pluginpb.HookResponse{Text: "too late"}, nil
}

// A hook's answer that arrives after its timeout is the timeout's: the
// message goes on as it was.
func TestHookAnswerAfterTheTimeoutIsSkipped(t *testing.T) {
	x := NewExtensions(ExtOptions{HookTimeout: 20 * time.Millisecond})
	p := &extPlugin{cap: Capability{Name: "late"}, hooks: lateHooks{}}
	in := core.HookInput{In: core.Inbound{Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}}, Text: "as it was"}
	r, err := x.hookStep(p, Hook{Stage: StagePre}).Pre(context.Background(), in)
	if err == nil || core.ErrorKind(err) != core.KindTimeout || !strings.Contains(err.Error(), "plugins.tools.hooks.timeout") {
		t.Fatalf("pre = %+v, %v; want a timeout error naming plugins.tools.hooks.timeout, so the hook is skipped", r, err)
	}
	out, err := x.hookStep(p, Hook{Stage: StagePost, Timeout: 10 * time.Millisecond}).Post(context.Background(), in, "the answer")
	if err == nil || core.ErrorKind(err) != core.KindTimeout || !strings.Contains(err.Error(), "10ms, the hook's own timeout") {
		t.Fatalf("post = %q, %v; want a timeout error naming the hook's own timeout, so the hook is skipped", out, err)
	}
}

// badMetaHooks rewrites the text and adds metadata the core refuses (a
// NUL byte).
type badMetaHooks struct{}

func (badMetaHooks) PreHook(_ context.Context, r *pluginpb.HookRequest, _ ...grpc.CallOption) (*pluginpb.HookResponse, error) {
	return &pluginpb.HookResponse{Text: "[redacted] question", Metadata: map[string]string{"bad": "a\x00b"}}, nil
}

func (badMetaHooks) PostHook(_ context.Context, r *pluginpb.HookRequest, _ ...grpc.CallOption) (*pluginpb.HookResponse, error) {
	return &pluginpb.HookResponse{Text: "[redacted] answer", Metadata: map[string]string{"bad": "a\x00b"}}, nil
}

// A hook's metadata the core refuses is left out, and its text still
// counts: a redacting hook's work is not undone by a bad entry.
func TestRefusedHookMetadataKeepsTheText(t *testing.T) {
	x := NewExtensions(ExtOptions{HookTimeout: time.Minute})
	p := &extPlugin{cap: Capability{Name: "redact"}, hooks: badMetaHooks{}}
	in := core.HookInput{In: core.Inbound{Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}}, Text: "secret question",
		Metadata: map[string]string{"lang": "en"}}
	pre, err := x.hookStep(p, Hook{Stage: StagePre}).Pre(context.Background(), in)
	if err != nil || pre.Text != "[redacted] question" || pre.Metadata["lang"] != "en" || pre.Metadata["bad"] != "" {
		t.Fatalf("pre = %+v, %v; want the redacted text, the metadata as it was", pre, err)
	}
	post, err := x.hookStep(p, Hook{Stage: StagePost}).Post(context.Background(), in, "secret answer")
	if err != nil || post.Text != "[redacted] answer" || post.Metadata != nil {
		t.Fatalf("post = %+v, %v; want the redacted text, the metadata unchanged (nil)", post, err)
	}
}
