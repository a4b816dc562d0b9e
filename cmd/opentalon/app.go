package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/core/schedule"
	"github.com/opentalon/opentalon/lua"
	"github.com/opentalon/opentalon/metrics"
	"github.com/opentalon/opentalon/metrics/notify"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/store"
)

// AppOptions are the process-level inputs of an App.
type AppOptions struct {
	// Stdin and Stdout feed the console channel; Interactive says they
	// are a terminal (a prompt and a waiting line are shown).
	Stdin       io.Reader
	Stdout      io.Writer
	Interactive bool
	Logger      *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Hooks, when set, run around every answer (tests use them to watch
	// the one answer pipeline), as the last step after the Lua scripts'
	// and the hook plugins'; unlike theirs, its errors fail the request.
	Hooks core.Hooks
	// Telegram, when set, adjusts the Telegram channel's options before
	// it is built (benchmarks turn the platform's pacing off to measure
	// the gateway's own capacity).
	Telegram func(*telegram.Options)
}

// App is the whole gateway, built explicitly from a config. Lifecycle:
// BuildApp (opens the database, starts nothing: the Lua engine, the
// plugins, the scheduler, the sinks and the server start in Run), Run,
// Close.
type App struct {
	cfg    *config.Config
	opts   AppOptions
	log    *slog.Logger
	db     *store.DB
	router *routing.Router
	// metrics is nil when server.metrics is off or the server is.
	metrics *metrics.Metrics
	// health keeps the recent LLM calls' outcomes per model, for the
	// status page and /models.
	health *metrics.Health
	// registry holds the tools of the running plugins.
	registry *plugins.Registry
	// lua is the Lua hook engine (nil without plugins.lua.scripts_dir).
	lua     *lua.Engine
	agent   *orchestrator.Orchestrator
	gateway *gateway.Gateway
	server  *http.Server
	// closers run on Close in reverse order.
	closers []func() error
	// eof is closed when the console input ends.
	eof chan struct{}
	// addr is the HTTP server's bound address once Run listens.
	addr chan string
	// ln is the server's listener bound by Listen before Run serves on it.
	ln net.Listener

	// The extension points beyond tools (extensions.go): the plugins'
	// hooks, routes, schedules and services; the scheduler; the
	// notification sinks (nil without sinks) and the plugin restart
	// watch; the blob store.
	ext         *plugins.Extensions
	sched       *schedule.Scheduler
	notifier    *notify.Notifier
	pluginWatch *notify.PluginWatch
	blobs       core.BlobStore
	// pluginKeys are the plugins' own keys to the HTTP API.
	pluginKeys *plugins.Credentials

	// The cluster (cluster.go): this replica's lease elector, the
	// singleton work it runs (Run waits for it), and how often the
	// maintenance prunes the queue (0 = never: only `run` prunes).
	elector    *lease.Elector
	holds      sync.WaitGroup
	pruneEvery time.Duration
}

// BuildApp builds every part from cfg.
func BuildApp(ctx context.Context, cfg *config.Config, o AppOptions) (_ *App, err error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &App{cfg: cfg, opts: o, log: o.Logger, eof: make(chan struct{}), addr: make(chan string, 1), pluginKeys: plugins.NewCredentials()}
	// A failed build closes what it opened.
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	// On SQLite this gateway is the only claimer of its database (run
	// holds the data directory's lock): the leases of a process before it
	// are dead, and taken back at its first claim.
	so := storeOptions(cfg, store.Options{Now: o.Now, SessionTTL: cfg.State.SessionTTL.D(), QueueRetention: cfg.State.Retention.D(), Logger: o.Logger,
		LeaseTTL: cfg.Queue.LeaseTTL.D(), SoleClaimer: cfg.State.Driver != config.DriverPostgres, SealKey: sealKey(cfg), Holder: cfg.Cluster.ReplicaID,
		Local: localConversation(cfg), Channels: replicaChannels(cfg), ChannelWait: cfg.Queue.MaxWait.D()})
	if so.Postgres != nil {
		// A gateway started beside its database (compose, a pod) waits
		// for it; the one-shot commands fail at once instead.
		so.Postgres.ConnectWait = cfg.State.Postgres.ConnectWait.D()
		so.Postgres.Writable = true
	}
	a.db, err = store.Open(ctx, cfg.State.DataDir, so)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.db.Close)
	a.buildElector()

	a.metrics = a.buildMetrics()
	if err := a.buildExtensions(); err != nil {
		return nil, err
	}
	a.buildNotifier()
	a.buildBlobs()
	// A provider back wakes the messages waiting for one; the gateway is
	// built below, before anything calls a provider.
	onBack := func(provider string) {
		if a.gateway != nil {
			a.gateway.ProviderBack(provider)
		}
	}
	if a.router, err = buildRouterWith(cfg, a.db, o.Now, o.Logger, a.routingObserver(), a.ext, a.events(), onBack); err != nil {
		return nil, err
	}
	tools, err := a.buildTools()
	if err != nil {
		return nil, err
	}
	if a.agent, err = a.buildAgent(tools, o.Now); err != nil {
		return nil, err
	}
	hooks := a.buildHooks() // builds the Lua engine the firing runner uses
	a.gateway = gateway.New(gateway.Options{
		Store:          a.db,
		Agent:          a.agent,
		Hooks:          hooks,
		Signals:        a.router,
		Workers:        cfg.Queue.Workers,
		MaxAttempts:    cfg.Queue.MaxAttempts,
		MaxPending:     cfg.Queue.MaxPending,
		MaxWait:        cfg.Queue.MaxWait.D(),
		RequestTimeout: cfg.Queue.RequestTimeout.D(),
		LeaseTTL:       cfg.Queue.LeaseTTL.D(),
		Access:         accessPolicies(cfg),
		Pairings:       a.db,
		Media:          buildMedia(cfg, a.db, a.router, o.Logger, &a.closers),
		Observer:       a.coreObserver(),
		Now:            o.Now,
		Logger:         o.Logger,
		Firings:        a.firingRunner(),
		Events:         a.events(),
		Authorizer:     a.authorizer(),
		AuthChannels:   cfg.Plugins.Auth.Channels,
		SharedQueue:    clustered(cfg),
	})
	if err := a.buildScheduler(); err != nil {
		return nil, err
	}
	a.addRouting()
	a.addMemory()
	if err := a.addChannels(); err != nil {
		return nil, err
	}
	if cfg.Server.Listen != "" {
		// A plugin's LLM call may take as long as a provider's timeout.
		a.server = toolkit.NewServer(a.httpHandler(), toolkit.ServerLimits{Write: 5 * time.Minute, Body: 8 << 20})
	}
	return a, nil
}

// Listen binds server.listen, once, and returns the bound address (the
// port the OS picked for port 0); "" without a server. Run serves on the
// listener, and binds it itself when Listen was not called; connections
// wait in the listener's backlog meanwhile. Close closes it when Run never
// served on it.
func (a *App) Listen() (string, error) {
	if a.server == nil {
		return "", nil
	}
	if a.ln == nil {
		ln, err := net.Listen("tcp", a.cfg.Server.Listen)
		if err != nil {
			return "", fmt.Errorf("server.listen %s: %w (set server.listen, or OPENTALON_LISTEN when the config leaves it out, to a free address; \"\" turns the server off)", a.cfg.Server.Listen, err)
		}
		a.ln = ln
		// Closing a listener twice (after Serve's Shutdown) only errs,
		// which Close ignores for it.
		a.closers = append(a.closers, func() error { ln.Close(); return nil })
	}
	return a.ln.Addr().String(), nil
}

// Run serves until ctx is cancelled, or, when the console is the only
// channel, until its input ended and every accepted message is answered.
func (a *App) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		<-ctx.Done()
		a.log.Info("shutting down: no new messages; finishing in-flight requests", "queue.shutdown_grace", a.cfg.Queue.ShutdownGrace.D().String())
	}()
	// Run logs nothing after it returned (the caller may read the log).
	defer func() { cancel(); <-logged }()
	if err := makeDropDirs(a.cfg, a.log); err != nil {
		return err
	}
	if err := a.checkReplicaID(ctx); err != nil {
		return err
	}
	if err := a.startLua(ctx); err != nil {
		return err
	}
	errc := make(chan error, 2) // the server's failure, the scheduler's
	apiURL := ""
	if a.server != nil {
		if _, err := a.Listen(); err != nil {
			return err
		}
		ln := a.ln
		a.log.Info("http server listening", "addr", ln.Addr().String())
		a.addr <- ln.Addr().String()
		apiURL = "http://" + ln.Addr().String()
		go func() {
			if err := a.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		defer func() {
			sctx, c := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer c()
			a.server.Shutdown(sctx)
		}()
	}
	a.startWatches(ctx)
	if err := a.startPlugins(ctx, apiURL); err != nil {
		return err
	}
	// Singleton work and this replica's record end (leases released)
	// before Run returns and the store closes.
	defer a.holds.Wait()
	defer cancel()
	a.startScheduler(ctx, func(err error) {
		select {
		case errc <- err:
		default:
		}
	})
	a.startReplica(ctx)
	a.startMaintenance(ctx)
	defer a.startRouterHousekeeping(ctx)()
	if consoleOnly(a.cfg) {
		go a.stopWhenDrained(ctx, cancel)
	}
	gwDone := make(chan error, 1)
	go func() { gwDone <- a.gateway.Run(ctx, a.cfg.Queue.ShutdownGrace.D()) }()
	a.log.Info("opentalon running", "channels", len(a.gateway.Channels()), "db", a.db.Name())
	a.logLocalProviders()
	var err error
	select {
	case err = <-gwDone:
	case err = <-errc:
		// The server failed: stop, but let the gateway finish its
		// in-flight work before the store is closed.
		cancel()
		<-gwDone
	}
	return err
}

// stopWhenDrained cancels the run once the console input has ended and the
// queue holds nothing queued or running, so `echo hi | opentalon` answers
// and exits.
func (a *App) stopWhenDrained(ctx context.Context, cancel func()) {
	select {
	case <-ctx.Done():
		return
	case <-a.eof:
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			counts, err := a.db.QueueCounts(ctx)
			if err == nil && counts[core.StatusQueued]+counts[core.StatusRunning] == 0 {
				cancel()
				return
			}
		}
	}
}

// Close releases everything BuildApp opened; it tolerates a partial build.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// httpHandler serves /healthz, /readyz, the plugin API, the status page
// and /metrics.
func (a *App) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	a.mountPluginAPI(mux)
	a.mountPluginRoutes(mux)
	a.mountOps(mux)
	return plugins.RefuseDotSegments(mux)
}

func (a *App) ready(ctx context.Context) error {
	if err := a.db.Ping(ctx); err != nil {
		return storeUnready(a.db.Driver(), a.db.Name(), err)
	}
	for _, st := range a.gateway.ChannelStates() {
		if st.Err != nil {
			return fmt.Errorf("channel %s: stopped (%v); restarting it (%d restarts so far)", st.Name, st.Err, st.Restarts)
		}
	}
	for _, ch := range a.gateway.Channels() {
		if hr, ok := ch.(core.HealthReporter); ok {
			if err := hr.Healthy(); err != nil {
				return fmt.Errorf("channel %s: %w", ch.Name(), err)
			}
		}
	}
	return nil
}

// storeUnready is /readyz's answer when the store does not answer: it
// names the database and its server (never the DSN's credentials) and the
// key that sets it, since the driver's own error may name neither (a
// server starting or shutting down, a refused login).
func storeUnready(driver, name string, err error) error {
	if driver == "postgres" {
		return fmt.Errorf("store: cannot reach %s (state.postgres.dsn): %w", name, err)
	}
	return fmt.Errorf("store: %s: %w", name, err)
}

// logLocalProviders says, once at start, which providers count as local
// by their address alone (models.providers.<id>.local unset): their calls
// share llm.max_concurrent_local, one at a time by default, which a proxy
// on this machine in front of a cloud API (LiteLLM and the like) does not
// want.
func (a *App) logLocalProviders() {
	for _, id := range slices.Sorted(maps.Keys(a.cfg.Models.Providers)) {
		p := a.cfg.Models.Providers[id]
		if p.Local != nil || !p.IsLocal() {
			continue
		}
		a.log.Info("provider counts as local by its address: its calls go "+strconv.Itoa(a.cfg.LLM.MaxConcurrentLocal)+" at a time (llm.max_concurrent_local); set models.providers."+id+".local: false if it is a proxy in front of a cloud API",
			"provider", id, "host", hostOf(p.BaseURL))
	}
}

// hostOf is the host of a base URL, for a log line (never its userinfo).
func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
