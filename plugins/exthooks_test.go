package plugins

import (
	"context"
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
	if err == nil || core.ErrorKind(err) != core.KindTimeout {
		t.Fatalf("pre = %+v, %v; want a timeout error, so the hook is skipped", r, err)
	}
	out, err := x.hookStep(p, Hook{Stage: StagePost}).Post(context.Background(), in, "the answer")
	if err == nil || core.ErrorKind(err) != core.KindTimeout {
		t.Fatalf("post = %q, %v; want a timeout error, so the hook is skipped", out, err)
	}
}
