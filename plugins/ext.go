package plugins

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// ExtOptions configure Extensions.
type ExtOptions struct {
	// HookTimeout bounds one gRPC hook call (plugins.tools.hooks.timeout,
	// default 2s); a hook may ask for less.
	HookTimeout time.Duration
	// MaxHookBytes bounds the text a hook returns (default 64 KiB).
	MaxHookBytes int
	// Sanitizer cleans what a pre-hook returns before the LLM sees it
	// (plugins.tools.sanitize); nil = the built-in shapes.
	Sanitizer *guard.Sanitizer
	// OnSchedules, when set, is called with a plugin's declared schedules
	// each time it registers (and an empty list when it declares none);
	// a declaration that does not decode (ScheduleDecl.Schedule) is logged
	// and left out.
	OnSchedules func(plugin string, want []core.Schedule)
	Logger      *slog.Logger
}

// Extensions holds the running plugins' extension points beyond tools:
// hooks (it is a core.HookSource), HTTP routes, schedules and the notify,
// authorize, blob and provider services. The Manager adds a plugin when
// it registers and removes it when it stops. Safe for concurrent use.
type Extensions struct {
	o   ExtOptions
	log *slog.Logger

	mu      sync.RWMutex
	plugins map[string]*extPlugin
	// steps are the hook steps of every plugin, rebuilt on each change.
	steps atomic.Pointer[[]core.HookStep]
}

// extPlugin is one running plugin's extension clients.
type extPlugin struct {
	cap      Capability
	conn     grpc.ClientConnInterface
	hooks    pluginpb.HookServiceClient
	http     pluginpb.HTTPServiceClient
	sched    pluginpb.ScheduleServiceClient
	notify   pluginpb.NotifyServiceClient
	auth     pluginpb.AuthServiceClient
	blobs    pluginpb.BlobServiceClient
	provider pluginpb.ProviderServiceClient
}

var _ core.HookSource = (*Extensions)(nil)

// NewExtensions returns an empty set.
func NewExtensions(o ExtOptions) *Extensions {
	if o.HookTimeout <= 0 {
		o.HookTimeout = 2 * time.Second
	}
	if o.MaxHookBytes <= 0 {
		o.MaxHookBytes = guard.DefaultMaxResponseBytes
	}
	if o.Sanitizer == nil {
		o.Sanitizer, _ = guard.NewSanitizer(nil)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	x := &Extensions{o: o, log: o.Logger.With("component", "plugins"), plugins: map[string]*extPlugin{}}
	x.steps.Store(&[]core.HookStep{})
	return x
}

// Add registers a running plugin's extension points on conn (its
// PluginService connection).
func (x *Extensions) Add(c Capability, conn grpc.ClientConnInterface) {
	p := &extPlugin{cap: c, conn: conn,
		hooks: pluginpb.NewHookServiceClient(conn), http: pluginpb.NewHTTPServiceClient(conn),
		sched: pluginpb.NewScheduleServiceClient(conn), notify: pluginpb.NewNotifyServiceClient(conn),
		auth: pluginpb.NewAuthServiceClient(conn), blobs: pluginpb.NewBlobServiceClient(conn),
		provider: pluginpb.NewProviderServiceClient(conn)}
	x.mu.Lock()
	x.plugins[c.Name] = p
	x.rebuildLocked()
	x.mu.Unlock()
	if len(c.Hooks)+len(c.Routes)+len(c.Schedules)+len(c.Services) > 0 {
		x.log.Info("plugin extension points", "plugin", c.Name, "hooks", len(c.Hooks), "routes", len(c.Routes), "schedules", len(c.Schedules), "services", c.Services)
	}
	if x.o.OnSchedules != nil {
		var want []core.Schedule
		for _, d := range c.Schedules {
			sc, err := d.Schedule()
			if err != nil {
				x.log.Error("plugin schedule refused", "plugin", c.Name, "schedule", d.ID, "err", err)
				continue
			}
			want = append(want, sc)
		}
		x.o.OnSchedules(c.Name, want)
	}
}

// Remove drops a stopped plugin, if conn is still the one registered.
func (x *Extensions) Remove(name string, conn grpc.ClientConnInterface) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.plugins[name]; ok && p.conn == conn {
		delete(x.plugins, name)
		x.rebuildLocked()
	}
}

// get returns a running plugin.
func (x *Extensions) get(name string) (*extPlugin, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p, ok := x.plugins[name]
	return p, ok
}

// service returns a running plugin that declared service, or an error
// that says what is missing.
func (x *Extensions) service(name, service string) (*extPlugin, error) {
	p, ok := x.get(name)
	if !ok {
		return nil, &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("plugin %s is not running", name)}
	}
	if !p.cap.Offers(service) {
		return nil, core.Errorf(core.KindInvalid, "plugin %s does not offer the %s service (it must list %q in its capabilities' services)", name, service, service)
	}
	return p, nil
}

// Capabilities lists the running plugins' declarations, by name.
func (x *Extensions) Capabilities() []Capability {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]Capability, 0, len(x.plugins))
	for _, p := range x.plugins {
		out = append(out, p.cap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// HookSteps implements core.HookSource: every running plugin's hooks,
// by order, then plugin name.
func (x *Extensions) HookSteps() []core.HookStep { return *x.steps.Load() }

func (x *Extensions) rebuildLocked() {
	var steps []core.HookStep
	for _, p := range x.plugins {
		for _, h := range p.cap.Hooks {
			steps = append(steps, x.hookStep(p, h))
		}
	}
	sort.SliceStable(steps, func(i, j int) bool {
		if steps[i].Order != steps[j].Order {
			return steps[i].Order < steps[j].Order
		}
		return steps[i].Name < steps[j].Name
	})
	x.steps.Store(&steps)
}

// callError turns a failed call to a plugin into an error with a kind.
func callError(plugin, what string, err error) error {
	kind := core.KindUnavailable
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		kind = core.KindTimeout
	case codes.Unimplemented:
		kind = core.KindInvalid
	case codes.InvalidArgument:
		kind = core.KindBadRequest
	case codes.ResourceExhausted:
		kind = core.KindRateLimited
	case codes.Unauthenticated, codes.PermissionDenied:
		kind = core.KindAuth
	case codes.Canceled:
		return fmt.Errorf("plugin %s: %s: %w", plugin, what, context.Canceled)
	}
	return &core.Error{Kind: kind, Msg: fmt.Sprintf("plugin %s: %s failed", plugin, what), Err: err}
}
