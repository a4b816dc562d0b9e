package plugintest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/guard"
	"github.com/opentalon/opentalon/plugins"
)

// Build compiles the Go plugin package at dir (for example ".") into a
// temporary directory (see Dir) and returns the binary's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(Dir(t), "plugin")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	return out
}

// Dir returns a new temporary directory that every user may enter and
// only the test's user may write, as a plugin_dir must be when the core
// runs as root and starts plugins as another user (plugins.tools.run_as).
func Dir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir's parent is private (0700).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("plugintest: %v", err)
		}
	}
	return dir
}

// Options tune Start.
type Options struct {
	// Args and Env are passed to the plugin.
	Args []string
	Env  []string
	// Timeout and MaxResponseBytes are the guard limits (0 = defaults).
	Timeout          time.Duration
	MaxResponseBytes int
	// State backs the plugin's state (default: a fresh MemState).
	State plugins.StateStore
	// HookTimeout bounds a hook call (0 = the core's default, 2s);
	// APIKey is the core's server.api_key for the plugin's routes.
	HookTimeout time.Duration
	APIKey      string
}

// Core is a running plugin and the pieces of the core around it.
type Core struct {
	t     testing.TB
	proc  *plugins.Process
	reg   *plugins.Registry
	guard *guard.Pipeline
	// State is the plugin's state store (a *MemState unless Options.State
	// was set).
	State plugins.StateStore
	ids   atomic.Int64
	ext   *plugins.Extensions
	http  http.Handler

	mu       sync.Mutex
	injected []plugins.Injection
}

// Start launches the plugin binary at path, performs the handshake and
// registers it; the test fails if any step fails. The plugin is stopped
// when the test ends.
func Start(t testing.TB, path string, o Options) *Core {
	t.Helper()
	if o.State == nil {
		o.State = NewMemState()
	}
	p, err := plugins.Launch(context.Background(), plugins.Spec{Path: path, Args: o.Args, Env: o.Env}, plugins.LaunchOptions{State: o.State})
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	limits := plugins.Limits{Timeout: o.Timeout, MaxResponseBytes: o.MaxResponseBytes}
	reg := plugins.NewRegistry(func(string) plugins.Limits { return limits })
	if err := reg.Register(p.Cap, p.Executor()); err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	c := &Core{t: t, proc: p, reg: reg, guard: guard.New(reg, nil, nil), State: o.State}
	c.ext = plugins.NewExtensions(plugins.ExtOptions{HookTimeout: o.HookTimeout})
	c.ext.Add(p.Cap, p.Conn())
	mux := http.NewServeMux()
	mux.Handle(plugins.RoutePattern, c.ext.HTTPHandler(plugins.HTTPOptions{APIKey: o.APIKey, Inject: func(_ context.Context, in plugins.Injection) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.injected = append(c.injected, in)
		return nil
	}}))
	c.http = mux
	return c
}

// Capabilities returns what the plugin declared.
func (c *Core) Capabilities() plugins.Capability { return c.proc.Cap }

// Tools returns the tools the LLM would be offered.
func (c *Core) Tools() []core.ToolSpec { return c.reg.Tools() }

// Call runs action through the guard pipeline, as the core does, and
// returns the guarded result.
func (c *Core) Call(action string, args map[string]string) core.ToolResult {
	call := core.ToolCall{ID: c.nextID(), Plugin: c.proc.Cap.Name, Action: action, Args: args}
	return c.guard.Run(context.Background(), call)
}

// CallRaw runs action without the guard and returns the plugin's own
// answer (for asserting on exact output).
func (c *Core) CallRaw(ctx context.Context, action string, args map[string]string) (core.ToolResult, error) {
	call := core.ToolCall{ID: c.nextID(), Plugin: c.proc.Cap.Name, Action: action, Args: args}
	return c.proc.Executor().Execute(ctx, call)
}

// Text calls action raw and fails the test on a transport error or a
// plugin error; it returns the content.
func (c *Core) Text(action string, args map[string]string) string {
	c.t.Helper()
	r, err := c.CallRaw(context.Background(), action, args)
	if err != nil {
		c.t.Fatalf("plugintest: %s: %v", action, err)
	}
	if r.Error != "" {
		c.t.Fatalf("plugintest: %s returned an error: %s", action, r.Error)
	}
	return r.Content
}

// Unwrap strips the [plugin_output] block of a guarded result.
func Unwrap(content string) string {
	s := strings.TrimPrefix(content, guard.OpenMarker+"\n")
	return strings.TrimSuffix(s, "\n"+guard.CloseMarker)
}

func (c *Core) nextID() string {
	return "call_" + strconv.FormatInt(c.ids.Add(1), 10)
}

// MemState is an in-memory plugins.StateStore.
type MemState struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

// NewMemState returns an empty store.
func NewMemState() *MemState { return &MemState{m: map[string]map[string]string{}} }

// PluginStateGet implements plugins.StateStore.
func (s *MemState) PluginStateGet(_ context.Context, pluginID, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[pluginID][key]
	return v, ok, nil
}

// PluginStateSet stores value under key in pluginID's namespace.
func (s *MemState) PluginStateSet(_ context.Context, pluginID, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[pluginID] == nil {
		s.m[pluginID] = map[string]string{}
	}
	s.m[pluginID][key] = value
	return nil
}

// PluginStatePut implements plugins.StateStore, with the quota checked
// like the core's store does.
func (s *MemState) PluginStatePut(ctx context.Context, pluginID, key, value string, q core.PluginStateQuota) error {
	s.mu.Lock()
	ns := s.m[pluginID]
	old, exists := ns[key]
	var used int64
	for k, v := range ns {
		used += int64(len(k) + len(v))
	}
	s.mu.Unlock()
	size := int64(len(value))
	if exists {
		size -= int64(len(old))
	} else {
		size += int64(len(key))
		if q.MaxKeys > 0 && len(ns)+1 > q.MaxKeys {
			return fmt.Errorf("%w: %s has %d keys, the limit is %d", core.ErrPluginStateQuota, pluginID, len(ns), q.MaxKeys)
		}
	}
	if q.MaxBytes > 0 && size > 0 && used+size > q.MaxBytes {
		return fmt.Errorf("%w: %s uses %d bytes, this write adds %d, the limit is %d", core.ErrPluginStateQuota, pluginID, used, size, q.MaxBytes)
	}
	return s.PluginStateSet(ctx, pluginID, key, value)
}

// PluginStateDelete implements plugins.StateStore.
func (s *MemState) PluginStateDelete(_ context.Context, pluginID, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m[pluginID], key)
	return nil
}

// PluginStateKeys implements plugins.StateStore.
func (s *MemState) PluginStateKeys(_ context.Context, pluginID, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := []string{}
	for k := range s.m[pluginID] {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// Namespaces lists the plugin ids that have state.
func (s *MemState) Namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var _ plugins.StateStore = (*MemState)(nil)

// Extensions is the plugin's extension points as the core sees them.
func (c *Core) Extensions() *plugins.Extensions { return c.ext }

// PreHook runs the plugin's pre hook as the core's pipeline does (the
// timeout, the sanitizer on what the LLM will see); the error is the
// hook's failure, which the core would log and skip.
func (c *Core) PreHook(in core.HookInput) (core.PreResult, error) {
	for _, st := range c.ext.HookSteps() {
		if st.Pre != nil {
			return st.Pre(context.Background(), in)
		}
	}
	c.t.Fatalf("plugintest: plugin %s declares no pre hook", c.proc.Cap.Name)
	return core.PreResult{}, nil
}

// PostHook runs the plugin's post hook on answer.
func (c *Core) PostHook(in core.HookInput, answer string) (string, error) {
	for _, st := range c.ext.HookSteps() {
		if st.Post != nil {
			res, err := st.Post(context.Background(), in, answer)
			return res.Text, err
		}
	}
	c.t.Fatalf("plugintest: plugin %s declares no post hook", c.proc.Cap.Name)
	return "", nil
}

// HTTP serves r through the core's plugin route handler (r's path starts
// with /api/plugins/<name>/) and returns the response; messages the
// handler injected are kept for Injected.
func (c *Core) HTTP(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	c.http.ServeHTTP(w, r)
	return w
}

// Injected returns the messages the plugin's routes injected so far.
func (c *Core) Injected() []plugins.Injection {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.injected)
}

// Fire calls the plugin back for a firing of its schedule id.
func (c *Core) Fire(id string, at time.Time) (core.FiringResult, error) {
	for _, s := range c.proc.Cap.Schedules {
		if s.ID == id {
			f := core.Firing{At: at, Conversation: core.ConversationKey{Channel: s.Channel, Chat: s.Chat, Thread: s.Thread}}
			return c.ext.OnSchedule(context.Background(), c.proc.Cap.Name, id, f)
		}
	}
	c.t.Fatalf("plugintest: plugin %s declares no schedule %q", c.proc.Cap.Name, id)
	return core.FiringResult{}, nil
}

// Notify sends the plugin an operator event.
func (c *Core) Notify(e core.OpsEvent) error {
	return c.ext.Notify(context.Background(), c.proc.Cap.Name, e, 0)
}

// Authorize asks the plugin about a user (no cache).
func (c *Core) Authorize(channel, chat, user string) (core.AuthDecision, error) {
	a := &plugins.Authorizer{Ext: c.ext, Plugin: c.proc.Cap.Name, TTL: time.Nanosecond}
	return a.Authorize(context.Background(), channel, chat, user)
}

// Blobs is the plugin as the core's blob store.
func (c *Core) Blobs() core.BlobStore { return &plugins.Blobs{Ext: c.ext, Plugin: c.proc.Cap.Name} }

// Complete asks the plugin, as an LLM provider, for an answer.
func (c *Core) Complete(r plugins.ProviderRequest) (plugins.ProviderResponse, error) {
	return c.ext.Complete(context.Background(), c.proc.Cap.Name, r)
}

// Stream asks the plugin for a streamed answer.
func (c *Core) Stream(r plugins.ProviderRequest, onText func(string)) (plugins.ProviderResponse, error) {
	return c.ext.Stream(context.Background(), c.proc.Cap.Name, r, onText)
}
