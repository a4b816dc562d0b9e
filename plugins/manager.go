package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Options configure a Manager.
type Options struct {
	// Dir is plugins.tools.plugin_dir: every executable file in it is a
	// plugin ("" = none).
	Dir string
	// Plugins are plugins.tools.plugins plus any specs built in code.
	Plugins []Spec
	// Registry receives the plugins' capabilities (required).
	Registry *Registry
	// Extensions receives the plugins' extension points beyond tools
	// (hooks, routes, schedules, services); nil = none are used.
	Extensions *Extensions
	// State backs the PluginState service (*store.DB).
	State StateStore
	// HealthInterval is plugins.tools.health_check_interval (default 30s).
	HealthInterval time.Duration
	// HealthTimeout bounds one health check (default 5s).
	HealthTimeout time.Duration
	// RestartOnFailure and MaxRestarts: plugins.tools.restart_on_failure
	// and max_restarts (default 3).
	RestartOnFailure bool
	MaxRestarts      int
	// Backoff is the wait before restart n (1-based); default 1s·2^(n-1),
	// at most 30s.
	Backoff func(n int) time.Duration
	// Sleep waits d or until ctx ends (tests make it instant).
	Sleep func(ctx context.Context, d time.Duration) error
	// SocketParent is where the directory holding the plugins' sockets
	// and temporary files is made: the data directory ("" = the
	// temporary directory).
	SocketParent string
	// Env is added to every plugin's environment (OPENTALON_API_URL, …).
	Env []string
	// Credentials, when set, gives each plugin process its own key to
	// the core's HTTP API as OPENTALON_API_KEY (see Credentials).
	Credentials  *Credentials
	StartTimeout time.Duration
	StopGrace    time.Duration
	// Sandbox confines the plugin processes (plugins.tools.run_as,
	// sandbox, process_limits); nil runs them as the core's user with
	// no_new_privs only. With a Sandbox, Start also marks the core
	// non-dumpable and logs which protections are active.
	Sandbox *Sandbox
	// Bindings records which binary each plugin name belongs to
	// (*store.DB); nil keeps the bindings in memory only.
	Bindings BindingStore
	// StateLimits bound each plugin's state (plugins.tools.state).
	StateLimits StateLimits
	// Now is the clock of the state write limits (default time.Now).
	Now func() time.Time
	// OnEvent, if set, is told about lifecycle events ("registered",
	// "deregistered", "gave_up") with the plugin name; for tests and
	// metrics. It must not block.
	OnEvent func(plugin, event string)
	Logger  *slog.Logger
}

// Manager launches and supervises the plugins.
type Manager struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	running map[string]*Process // by plugin name
	owners  map[string]Binary   // plugin name → the binary that claimed it
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	iso     *Isolation
	root    *socketRoot // the plugins' socket root
}

// BindingStore keeps the binding of plugin names to binaries; *store.DB
// implements it.
type BindingStore interface {
	// PluginBind binds name to the binary unless name is bound already,
	// and returns the binding in force.
	PluginBind(ctx context.Context, name, path, sha256 string) (core.PluginBinding, error)
}

// errRefused marks a plugin refused for good: restarting cannot help.
var errRefused = errors.New("refused")

// NewManager builds a manager; it starts nothing.
func NewManager(o Options) *Manager {
	if o.HealthInterval <= 0 {
		o.HealthInterval = 30 * time.Second
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 5 * time.Second
	}
	if o.MaxRestarts < 0 {
		o.MaxRestarts = 0
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration {
			d := time.Second << min(n-1, 5)
			return min(d, 30*time.Second)
		}
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnEvent == nil {
		o.OnEvent = func(string, string) {}
	}
	return &Manager{o: o, log: o.Logger.With("component", "plugins"), running: map[string]*Process{}, owners: map[string]Binary{}}
}

// Discover lists the plugin specs: every executable regular file in Dir
// (sorted) followed by the explicit ones. A Dir that group or others may
// write is refused: whoever can write there can add or replace plugins.
func Discover(dir string, explicit []Spec) ([]Spec, error) {
	var specs []Spec
	if dir != "" {
		// Either failure is the config's (core.KindInvalid): restarting
		// cannot get past it.
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, core.Errorf(core.KindInvalid, "read plugins.tools.plugin_dir %s: %w (create the directory, or set plugin_dir to \"\" to run only the plugins listed in plugins.tools.plugins)", dir, err)
		}
		if err := checkNotWritable("plugins.tools.plugin_dir", dir, false); err != nil {
			return nil, core.Errorf(core.KindInvalid, "%w", err)
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			path := filepath.Join(dir, n)
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			specs = append(specs, Spec{Path: path})
		}
	}
	return append(specs, explicit...), nil
}

// Start launches every discovered plugin and returns once each has either
// registered or failed its first start (failures are logged with the fix
// and retried like crashes). Supervision runs until Close.
func (m *Manager) Start(ctx context.Context) error {
	if m.o.Registry == nil {
		return errors.New("plugins: Manager needs a Registry")
	}
	specs, err := Discover(m.o.Dir, m.o.Plugins)
	if err != nil {
		return err
	}
	if m.o.Sandbox != nil {
		if m.iso, err = NewIsolation(*m.o.Sandbox); err != nil {
			return err
		}
		m.iso.Describe(m.log, HardenCore())
	}
	if m.root, err = newSocketRoot(m.o.SocketParent, m.iso.credential() != nil, m.log); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	var first sync.WaitGroup
	for _, s := range specs {
		first.Add(1)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.supervise(ctx, s, first.Done)
		}()
	}
	first.Wait()
	return nil
}

// supervise runs one plugin: launch, register, watch, and restart with
// backoff up to MaxRestarts. started is called after the first attempt.
func (m *Manager) supervise(ctx context.Context, spec Spec, started func()) {
	once := sync.OnceFunc(started)
	defer once()
	restarts := 0
	for {
		p, err := m.launch(ctx, spec)
		once()
		if err == nil {
			up := time.Now()
			m.watch(ctx, p)
			// A plugin that ran healthy for a while before it failed
			// starts with a fresh restart budget: max_restarts bounds a
			// crash loop, not crashes weeks apart.
			if time.Since(up) >= 5*m.o.HealthInterval {
				restarts = 0
			}
		} else if ctx.Err() == nil {
			m.log.Error("plugin failed to start", "path", spec.Path, "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRefused) {
			name := spec.Path
			if p != nil && p.Cap.Name != "" {
				name = p.Cap.Name
			}
			m.o.OnEvent(name, "gave_up")
			return
		}
		if !m.o.RestartOnFailure || restarts >= m.o.MaxRestarts {
			name := spec.Path
			if p != nil && p.Cap.Name != "" {
				name = p.Cap.Name
			}
			fix := "see the plugin's output above; raise plugins.tools.max_restarts to keep trying"
			if !m.o.RestartOnFailure {
				fix = "see the plugin's output above; set plugins.tools.restart_on_failure: true to restart it"
			}
			m.log.Error("plugin stopped and will not be restarted", "plugin", name, "restarts", restarts, "fix", fix)
			m.o.OnEvent(name, "gave_up")
			return
		}
		restarts++
		wait := m.o.Backoff(restarts)
		m.log.Warn("restarting plugin", "path", spec.Path, "attempt", restarts, "after", wait)
		if m.o.Sleep(ctx, wait) != nil {
			return
		}
	}
}

func (m *Manager) launch(ctx context.Context, spec Spec) (*Process, error) {
	env, key := m.o.Env, ""
	if m.o.Credentials != nil {
		key = m.o.Credentials.issue()
		env = append(env[:len(env):len(env)], EnvAPIKey+"="+key)
	}
	p, err := m.launchWith(ctx, spec, env, key)
	if key != "" {
		if err != nil {
			m.o.Credentials.revoke(key)
		} else {
			p.apiKey = key
		}
	}
	return p, err
}

// launchWith starts one plugin process; key (if any) is bound to the
// name the plugin declares as soon as it is claimed, before the plugin is
// registered, so its routes never answer before its own key opens them.
func (m *Manager) launchWith(ctx context.Context, spec Spec, env []string, key string) (*Process, error) {
	p, err := Launch(ctx, spec, LaunchOptions{
		State: m.o.State, StateLimits: m.o.StateLimits, Env: env, StartTimeout: m.o.StartTimeout, StopGrace: m.o.StopGrace,
		Isolation: m.iso, SocketRoot: m.root.dir, Now: m.o.Now, Logger: m.o.Logger,
		Claim: func(name string, bin Binary) error {
			if err := m.claim(ctx, name, bin); err != nil {
				return err
			}
			if key != "" {
				m.o.Credentials.bind(key, name)
			}
			return nil
		},
	})
	if err != nil {
		return p, err
	}
	if err := m.o.Registry.Register(p.Cap, p.Executor()); err != nil {
		p.Close()
		return p, fmt.Errorf("plugin %s: %w", spec.Path, err)
	}
	m.mu.Lock()
	m.running[p.Cap.Name] = p
	m.mu.Unlock()
	if m.o.Extensions != nil {
		m.o.Extensions.Add(p.Cap, p.conn)
	}
	m.log.Info("plugin registered", "plugin", p.Cap.Name, "path", spec.Path, "sha256", p.Binary.SHA256, "actions", len(p.Cap.Actions))
	m.o.OnEvent(p.Cap.Name, "registered")
	return p, nil
}

// claim binds a plugin name to the first binary (path and content hash)
// that declared it, in the database when there is one, so no other
// binary can take over the name, and with it the plugin's state.
func (m *Manager) claim(ctx context.Context, name string, bin Binary) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner, ok := m.owners[name]
	if !ok && m.o.Bindings != nil {
		b, err := m.o.Bindings.PluginBind(ctx, name, bin.Path, bin.SHA256)
		if err != nil {
			return err
		}
		owner, ok = Binary{Path: b.Path, SHA256: b.SHA256}, true
		if owner != bin {
			return refusal(name, owner, bin, b.BoundAt)
		}
	}
	if ok && owner != bin {
		return refusal(name, owner, bin, time.Time{})
	}
	m.owners[name] = bin
	return nil
}

func refusal(name string, owner, bin Binary, since time.Time) error {
	when := ""
	if !since.IsZero() {
		when = " since " + since.UTC().Format(time.RFC3339)
	}
	what := "another binary"
	if owner.Path == bin.Path {
		what = "a changed binary at the same path"
	}
	return fmt.Errorf("%w: the plugin name %q belongs to %s (sha256 %.12s…)%s, and %s (sha256 %.12s…) is %s: it may not register under that name or reach that plugin's state; if it replaces that plugin on purpose, run: opentalon plugins unbind %s",
		errRefused, name, owner.Path, owner.SHA256, when, bin.Path, bin.SHA256, what, name)
}

// watch returns when the plugin exits, fails a health check or ctx ends;
// it deregisters and stops the plugin.
func (m *Manager) watch(ctx context.Context, p *Process) {
	t := time.NewTicker(m.o.HealthInterval)
	defer t.Stop()
	defer m.stop(p)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.Done():
			m.log.Error("plugin exited", "plugin", p.Cap.Name, "err", p.ExitErr())
			return
		case <-t.C:
			if err := m.ping(ctx, p); err != nil {
				m.log.Error("plugin failed its health check", "plugin", p.Cap.Name, "err", err)
				return
			}
		}
	}
}

func (m *Manager) ping(ctx context.Context, p *Process) error {
	ctx, cancel := context.WithTimeout(ctx, m.o.HealthTimeout)
	defer cancel()
	return p.Ping(ctx)
}

func (m *Manager) stop(p *Process) {
	if !p.stopped.CompareAndSwap(false, true) {
		return
	}
	m.o.Registry.Deregister(p.Cap.Name)
	if m.o.Extensions != nil {
		m.o.Extensions.Remove(p.Cap.Name, p.conn)
	}
	m.mu.Lock()
	if m.running[p.Cap.Name] == p {
		delete(m.running, p.Cap.Name)
	}
	m.mu.Unlock()
	p.Close()
	if p.apiKey != "" {
		m.o.Credentials.revoke(p.apiKey)
	}
	m.o.OnEvent(p.Cap.Name, "deregistered")
}

// CheckHealth pings every running plugin now and stops the ones that do
// not answer (their supervisors restart them). It returns the names that
// failed.
func (m *Manager) CheckHealth(ctx context.Context) []string {
	m.mu.Lock()
	procs := make([]*Process, 0, len(m.running))
	for _, p := range m.running {
		procs = append(procs, p)
	}
	m.mu.Unlock()
	var failed []string
	for _, p := range procs {
		if err := m.ping(ctx, p); err != nil {
			m.log.Error("plugin failed its health check", "plugin", p.Cap.Name, "err", err)
			failed = append(failed, p.Cap.Name)
			m.stop(p)
		}
	}
	sort.Strings(failed)
	return failed
}

// Running lists the names of the running plugins.
func (m *Manager) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.running))
	for n := range m.running {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Close stops supervision and every plugin's process group.
func (m *Manager) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	if m.root != nil {
		return m.root.remove()
	}
	return nil
}
