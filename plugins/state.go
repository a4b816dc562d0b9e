package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	pluginpb "github.com/opentalon/opentalon/proto"
)

// StateStore persists plugin state; *store.DB implements it. pluginID is
// always supplied by the core.
type StateStore interface {
	PluginStateGet(ctx context.Context, pluginID, key string) (value string, found bool, err error)
	PluginStateSet(ctx context.Context, pluginID, key, value string) error
	PluginStateDelete(ctx context.Context, pluginID, key string) error
	PluginStateKeys(ctx context.Context, pluginID, prefix string) ([]string, error)
}

// State limits.
const (
	MaxStateKeyBytes   = 512
	MaxStateValueBytes = 1 << 20
)

// stateServer serves PluginState for exactly one plugin. Its namespace is
// set by the core after the handshake; until then every call is refused.
type stateServer struct {
	pluginpb.UnimplementedPluginStateServer
	store StateStore
	id    atomic.Pointer[string]
	log   *slog.Logger
}

func (s *stateServer) bind(pluginID string) { s.id.Store(&pluginID) }

func (s *stateServer) ns() (string, error) {
	if p := s.id.Load(); p != nil {
		return *p, nil
	}
	return "", status.Error(codes.FailedPrecondition, "plugin state is available once the plugin has registered (after its Capabilities call)")
}

func checkKey(key string) error {
	if key == "" {
		return status.Error(codes.InvalidArgument, "state key is empty")
	}
	if len(key) > MaxStateKeyBytes {
		return status.Errorf(codes.InvalidArgument, "state key is %d bytes; the limit is %d", len(key), MaxStateKeyBytes)
	}
	return nil
}

func (s *stateServer) internal(op string, err error) error {
	s.log.Error("plugin state "+op+" failed", "err", err)
	return status.Errorf(codes.Internal, "plugin state %s failed", op)
}

func (s *stateServer) Get(ctx context.Context, req *pluginpb.StateGetRequest) (*pluginpb.StateGetResponse, error) {
	ns, err := s.ns()
	if err != nil {
		return nil, err
	}
	if err := checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	v, found, err := s.store.PluginStateGet(ctx, ns, req.GetKey())
	if err != nil {
		return nil, s.internal("get", err)
	}
	return &pluginpb.StateGetResponse{Value: v, Found: found}, nil
}

func (s *stateServer) Set(ctx context.Context, req *pluginpb.StateSetRequest) (*emptypb.Empty, error) {
	ns, err := s.ns()
	if err != nil {
		return nil, err
	}
	if err := checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	if len(req.GetValue()) > MaxStateValueBytes {
		return nil, status.Errorf(codes.InvalidArgument, "state value is %d bytes; the limit is %d", len(req.GetValue()), MaxStateValueBytes)
	}
	if err := s.store.PluginStateSet(ctx, ns, req.GetKey(), req.GetValue()); err != nil {
		return nil, s.internal("set", err)
	}
	return &emptypb.Empty{}, nil
}

func (s *stateServer) Delete(ctx context.Context, req *pluginpb.StateDeleteRequest) (*emptypb.Empty, error) {
	ns, err := s.ns()
	if err != nil {
		return nil, err
	}
	if err := checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	if err := s.store.PluginStateDelete(ctx, ns, req.GetKey()); err != nil {
		return nil, s.internal("delete", err)
	}
	return &emptypb.Empty{}, nil
}

func (s *stateServer) Keys(ctx context.Context, req *pluginpb.StateKeysRequest) (*pluginpb.StateKeysResponse, error) {
	ns, err := s.ns()
	if err != nil {
		return nil, err
	}
	keys, err := s.store.PluginStateKeys(ctx, ns, req.GetPrefix())
	if err != nil {
		return nil, s.internal("keys", err)
	}
	return &pluginpb.StateKeysResponse{Keys: keys}, nil
}

// peerListener accepts only connections from processes in the plugin's
// session (the plugin and its descendants; see procfs.go), checked with
// SO_PEERCRED, so a plugin that finds another plugin's state socket
// cannot use it.
type peerListener struct {
	net.Listener
	sid int // 0 until the plugin is started
	log *slog.Logger
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := l.check(c); err != nil {
			l.log.Warn("refused a connection to a plugin state socket", "err", err)
			c.Close()
			continue
		}
		return c, nil
	}
}

func (l *peerListener) check(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	sid, err := sessionOf(int(cred.Pid))
	if err != nil {
		return fmt.Errorf("peer pid %d: %w", cred.Pid, err)
	}
	if l.sid == 0 || sid != l.sid {
		return fmt.Errorf("peer pid %d (session %d) is not in the plugin's session %d", cred.Pid, sid, l.sid)
	}
	return nil
}

func newStateGRPC(s *stateServer) *grpc.Server {
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(MaxStateValueBytes + 4096))
	pluginpb.RegisterPluginStateServer(srv, s)
	return srv
}
