package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/schedule"
	"github.com/opentalon/opentalon/guard"
	"github.com/opentalon/opentalon/metrics/notify"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/store"
)

// pluginsConfigured says plugins.tools starts any plugin process.
func pluginsConfigured(cfg *config.Config) bool {
	return cfg.Plugins.Tools.PluginDir != "" || len(cfg.Plugins.Tools.Plugins) > 0
}

// buildExtensions builds the registry of the plugins' extension points
// beyond tools (hooks, routes, schedules, services); the plugins fill it
// as they register.
func (a *App) buildExtensions() error {
	tc := a.cfg.Plugins.Tools
	san, err := guard.NewSanitizer(tc.Sanitize.ExtraPatterns)
	if err != nil {
		return err
	}
	a.ext = plugins.NewExtensions(plugins.ExtOptions{
		HookTimeout:  tc.Hooks.Timeout.D(),
		MaxHookBytes: tc.Defaults.MaxResponseBytes,
		Sanitizer:    san,
		OnSchedules:  a.syncPluginSchedules,
		Logger:       a.log,
	})
	return nil
}

// buildNotifier builds the notification sinks (notifications.sinks); nil
// without sinks, and then no operator event is emitted anywhere.
func (a *App) buildNotifier() {
	n := a.cfg.Notifications
	if len(n.Sinks) == 0 {
		return
	}
	var routes []notify.Route
	for _, s := range n.Sinks {
		var sink notify.Sink
		switch s.Type {
		case config.SinkWebhook:
			sink = notify.Webhook{URL: string(s.URL), Secret: s.Secret, Client: &http.Client{Timeout: 15 * time.Second}}
		case config.SinkChat:
			// The gateway is built after the sinks: it is read when an
			// event is posted.
			sink = notify.Chat{Conversation: core.ConversationKey{Channel: s.Channel, Chat: s.Chat, Thread: s.Thread},
				Post: func(ctx context.Context, conv core.ConversationKey, text string) error {
					return a.gateway.Post(ctx, conv, text)
				}}
		case config.SinkPlugin:
			name := s.Plugin
			sink = notify.Func{Label: "plugin " + name, Fn: func(ctx context.Context, nt notify.Notification) error {
				return a.ext.Notify(ctx, name, nt.OpsEvent, nt.Suppressed)
			}}
		}
		routes = append(routes, notify.Route{Sink: sink, Events: s.Events})
	}
	o := notify.Options{Routes: routes, Window: n.Window.D(), MaxPerWindow: n.MaxPerWindow, Now: a.opts.Now, Logger: a.log}
	if clustered(a.cfg) {
		o.Claim = a.db.ClaimNotice // each notice told once for the cluster
	}
	a.notifier = notify.New(o)
	a.closers = append(a.closers, a.notifier.Close)
	a.pluginWatch = &notify.PluginWatch{Events: a.notifier, Now: a.opts.Now}
}

// events is where operator events go: nil without a notifier.
func (a *App) events() core.OpsEvents {
	if a.notifier == nil {
		return nil
	}
	return a.notifier
}

// startWatches starts what turns states into operator events: the
// channel monitor.
func (a *App) startWatches(ctx context.Context) {
	if a.notifier == nil {
		return
	}
	a.notifier.Start(ctx)
	m := &notify.Monitor{Statuses: a.monitorStatuses, DownAfter: a.cfg.Notifications.ChannelDownAfter.D(), Events: a.notifier, Now: a.opts.Now}
	go m.Run(ctx)
}

// monitorStatuses is each channel's liveness, as the status page sees it.
func (a *App) monitorStatuses() []notify.ChannelStatus {
	var out []notify.ChannelStatus
	for _, c := range a.statusChannels() {
		out = append(out, notify.ChannelStatus{Name: c.Name, Up: c.Up, Err: c.Error})
	}
	return out
}

// authorizer is the auth provider plugin (plugins.auth.plugin), or nil.
func (a *App) authorizer() core.Authorizer {
	ac := a.cfg.Plugins.Auth
	if ac.Plugin == "" {
		return nil
	}
	return &plugins.Authorizer{Ext: a.ext, Plugin: ac.Plugin, TTL: ac.CacheTTL.D(), Timeout: ac.Timeout.D(), Now: a.opts.Now}
}

// buildBlobs is where the gateway keeps files: a blob storage plugin
// (plugins.blobs.plugin), which then keeps the media files too (the
// media directory is this machine's cache of them), or <data_dir>/blobs.
func (a *App) buildBlobs() {
	if p := a.cfg.Plugins.Blobs.Plugin; p != "" {
		a.blobs = &plugins.Blobs{Ext: a.ext, Plugin: p}
		a.db.UseBlobs(a.blobs)
		return
	}
	a.blobs = store.NewFileBlobs(filepath.Join(a.cfg.State.DataDir, store.BlobDir))
}

// Blobs is the store for the files the gateway keeps (media, exports).
func (a *App) Blobs() core.BlobStore { return a.blobs }

// buildScheduler builds the scheduler and adds /schedule, /schedules and
// /unschedule; it runs in Run.
func (a *App) buildScheduler() error {
	loc, err := schedule.LoadZone(a.cfg.Timezone, time.Local)
	if err != nil {
		return fmt.Errorf("timezone: %w", err)
	}
	// Of the replicas one fires (the scheduler lease); a leader taking
	// over from one that died fires what fell due in the gap.
	var grace time.Duration
	if clustered(a.cfg) {
		grace = 2 * a.cfg.Cluster.LeaseTTL.D()
	}
	// Only replicas sharing a database need the scheduler's lease (and
	// its poll of the schedules' version each second): on SQLite the one
	// process fires and sees every change itself.
	var hold func(context.Context, string, func(context.Context) error) error
	// A plugin's schedule on a channel this process does not run is
	// refused; of replicas, another may run it (their configs may
	// differ, and the claims give each firing to one that does), and a
	// refusal here would drop it from the schedules every replica shares.
	enabled := a.gateway.HasChannel
	if clustered(a.cfg) {
		hold, enabled = a.holdSync, nil
	}
	a.sched = schedule.New(schedule.Options{Store: a.db, Queue: a.gateway, Location: loc, Enabled: enabled, Now: a.opts.Now, Logger: a.log,
		Hold: hold, Grace: grace})
	for _, c := range a.sched.Commands() {
		a.gateway.AddCommand(c)
	}
	return nil
}

// configSchedules maps schedules: onto the scheduler's records.
func configSchedules(cfg *config.Config) []core.Schedule {
	var out []core.Schedule
	for _, s := range cfg.Schedules {
		sc := core.Schedule{Interval: s.Interval.D(), Cron: s.Cron, Prompt: s.Prompt, Plugin: s.Plugin, Action: s.Action, Args: s.Args,
			Conversation: core.ConversationKey{Channel: s.Channel, Chat: s.Chat, Thread: s.Thread},
			Model:        s.Model, Timezone: s.Timezone, Missed: s.Missed}
		if sc.Cron != "" {
			sc.Spec = "cron " + sc.Cron
		} else {
			sc.Spec = "every " + schedule.Every(sc.Interval)
		}
		out = append(out, sc)
	}
	return out
}

// startScheduler stores the config's schedules and fires every schedule
// until ctx ends. No first message needs it: it starts startSettle after
// the channels (afterStart), and a failure to store the schedules ends
// the run through fail, but for a database out of reach, waited for.
func (a *App) startScheduler(ctx context.Context, fail func(error)) {
	a.holds.Add(1)
	go func() {
		defer a.holds.Done()
		if !afterStart(ctx) {
			return
		}
		// A database out of reach for a moment (a failover) is waited
		// for, as every other store call does; any other failure ends
		// the run.
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			err := a.sched.SyncConfig(ctx, configSchedules(a.cfg))
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if !errors.As(err, &ne) {
				fail(fmt.Errorf("schedules: %w", err))
				return
			}
			a.log.Warn("store the config's schedules: the database is out of reach; trying again", "err", err, "in", wait)
			if (clock.Real{}).Sleep(ctx, wait) != nil {
				return
			}
		}
		if err := a.sched.Run(ctx); err != nil {
			a.log.Error("scheduler stopped", "err", err)
		}
	}()
}

// syncPluginSchedules stores the schedules a plugin declared when it
// registers (the scheduler refuses, with a log line, those that cannot
// run).
func (a *App) syncPluginSchedules(plugin string, want []core.Schedule) {
	if err := a.sched.SyncPlugin(context.Background(), plugin, want); err != nil {
		a.log.Error("store a plugin's schedules", "plugin", plugin, "err", err)
	}
}

// firingRunner does a firing's own work: the Lua scripts' on_schedule,
// then a plugin action or a plugin's OnSchedule (core/schedule.Runner).
func (a *App) firingRunner() schedule.Runner {
	r := schedule.Runner{Actions: a.registry, Callbacks: a.ext}
	if a.lua != nil {
		r.Scripts = a.lua
	}
	return r
}

// inject commits a message a plugin's route injected.
func (a *App) inject(ctx context.Context, in plugins.Injection) error {
	_, err := a.gateway.Inject(ctx, core.Inbound{
		Conversation: core.ConversationKey{Channel: in.Channel, Chat: in.Chat, Thread: in.Thread},
		MessageID:    in.ID, UserID: in.UserID, UserName: in.UserName, Text: in.Text,
		Origin: core.OriginPlugin + in.Plugin,
	})
	return err
}

// mountPluginRoutes serves the plugins' routes under /api/plugins/<name>/.
func (a *App) mountPluginRoutes(mux *http.ServeMux) {
	h := a.cfg.Plugins.Tools.HTTP
	keys := a.pluginAPIKeys()
	mux.Handle(plugins.RoutePattern, a.ext.HTTPHandler(plugins.HTTPOptions{APIKey: keys.Operator, Plugins: keys.Plugins,
		MaxBody: h.MaxBodyBytes, Timeout: h.Timeout.D(), Inject: a.inject, Logger: a.log}))
}

// hookSources are the hook sources interleaved by order: the Lua
// scripts and the hook plugins.
func (a *App) hookSources() []core.HookSource {
	var out []core.HookSource
	if a.lua != nil {
		out = append(out, a.lua)
	}
	if pluginsConfigured(a.cfg) {
		out = append(out, a.ext)
	}
	return slices.Clip(out)
}
