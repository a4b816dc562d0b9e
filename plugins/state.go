package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// StateStore persists plugin state; *store.DB implements it. pluginID is
// always supplied by the core.
type StateStore interface {
	PluginStateGet(ctx context.Context, pluginID, key string) (value string, found bool, err error)
	// PluginStatePut writes unless the namespace would pass q; it then
	// returns an error wrapping core.ErrPluginStateQuota.
	PluginStatePut(ctx context.Context, pluginID, key, value string, q core.PluginStateQuota) error
	PluginStateDelete(ctx context.Context, pluginID, key string) error
	PluginStateKeys(ctx context.Context, pluginID, prefix string) ([]string, error)
}

// State limits.
const (
	MaxStateKeyBytes   = 512
	MaxStateValueBytes = 1 << 20
)

// StateLimits bound one plugin's state (plugins.tools.state): the size
// of its namespace, and how fast it may write so it cannot hold the
// database's single writer.
type StateLimits struct {
	Quota core.PluginStateQuota
	// WritesPerSecond bounds Set and Delete calls (0 = unbounded), with
	// bursts of up to twice as many.
	WritesPerSecond float64
}

// stateServer serves PluginState for exactly one plugin. Its namespace is
// set by the core after the handshake; until then every call is refused.
type stateServer struct {
	pluginpb.UnimplementedPluginStateServer
	store  StateStore
	limits StateLimits
	writes *bucket
	id     atomic.Pointer[string]
	log    *slog.Logger
}

func newStateServer(st StateStore, l StateLimits, now func() time.Time, log *slog.Logger) *stateServer {
	if st == nil {
		st = noState{}
	}
	s := &stateServer{store: st, limits: l, log: log}
	if l.WritesPerSecond > 0 {
		s.writes = newBucket(l.WritesPerSecond, 2*l.WritesPerSecond, now)
	}
	return s
}

func (s *stateServer) bind(pluginID string) { s.id.Store(&pluginID) }

func (s *stateServer) ns() (string, error) {
	if p := s.id.Load(); p != nil {
		return *p, nil
	}
	return "", status.Error(codes.FailedPrecondition, "plugin state is available once the plugin has registered (after its Capabilities call)")
}

// allowWrite takes one write from the plugin's budget.
func (s *stateServer) allowWrite() error {
	if s.writes == nil || s.writes.take() {
		return nil
	}
	return status.Errorf(codes.ResourceExhausted, "state writes are limited to %g per second (plugins.tools.state.writes_per_second); write less often or batch values", s.limits.WritesPerSecond)
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
	if core.ErrorKind(err) == core.KindInvalid {
		// The store refused what the plugin sent (a key PostgreSQL
		// cannot hold): the plugin is told why.
		return status.Errorf(codes.InvalidArgument, "plugin state %s: %v", op, err)
	}
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
	if err := s.allowWrite(); err != nil {
		return nil, err
	}
	if err := s.store.PluginStatePut(ctx, ns, req.GetKey(), req.GetValue(), s.limits.Quota); err != nil {
		if errors.Is(err, core.ErrPluginStateQuota) {
			s.log.Warn("plugin state quota reached", "err", err)
			return nil, status.Errorf(codes.ResourceExhausted, "%v (plugins.tools.state.max_keys, plugins.tools.state.max_bytes); delete keys you no longer need", err)
		}
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
	if err := s.allowWrite(); err != nil {
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

// bucket is a token bucket: rate tokens a second, at most burst saved.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newBucket(rate, burst float64, now func() time.Time) *bucket {
	burst = max(burst, 1)
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now(), now: now}
}

func (b *bucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	if d := t.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = t
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
