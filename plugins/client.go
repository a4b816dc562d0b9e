package plugins

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// MaxTransportBytes caps one gRPC message from a plugin. It is far above
// any max_response_bytes so an oversized answer reaches the guard and is
// truncated with a notice; above it the call fails.
const MaxTransportBytes = 32 << 20

// rpcExecutor is the thin adapter from guard.Executor to the gRPC client.
type rpcExecutor struct {
	client pluginpb.PluginServiceClient
	name   string
}

func (e *rpcExecutor) Execute(ctx context.Context, call core.ToolCall) (core.ToolResult, error) {
	resp, err := e.client.Execute(ctx, &pluginpb.ToolCallRequest{Id: call.ID, Plugin: call.Plugin, Action: call.Action, Args: call.Args})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded {
			// gRPC's own timer can fire just before ctx's.
			return core.ToolResult{}, fmt.Errorf("plugin %s: execute %s: %w (%v)", e.name, call.Action, context.DeadlineExceeded, err)
		}
		return core.ToolResult{}, fmt.Errorf("plugin %s: execute %s: %w", e.name, call.Action, err)
	}
	r := core.ToolResult{CallID: resp.GetCallId(), Content: resp.GetContent(), Error: resp.GetError()}
	for _, f := range resp.GetFiles() {
		r.Files = append(r.Files, core.Attachment{Name: f.GetName(), MIME: f.GetMimeType(), Data: f.GetData(), Size: int64(len(f.GetData()))})
	}
	return r, nil
}

func capabilities(ctx context.Context, c pluginpb.PluginServiceClient) (Capability, error) {
	pc, err := c.Capabilities(ctx, &emptypb.Empty{})
	if err != nil {
		return Capability{}, err
	}
	return capabilityFromProto(pc), nil
}

func dialUnix(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxTransportBytes)))
}
