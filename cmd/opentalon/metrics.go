package main

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/metrics"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/routing"
)

// buildMetrics builds the Prometheus metrics when the server runs and
// server.metrics is on; nil otherwise (and nothing is counted). The
// sources are read when /metrics is scraped.
func (a *App) buildMetrics() *metrics.Metrics {
	if a.cfg.Server.Listen == "" || !a.cfg.Server.Metrics {
		return nil
	}
	o := metrics.Options{
		Queue:    a.db,
		Ledger:   a.db,
		Channels: a.channelStatuses,
		Profiles: a.profileStatuses,
		Now:      a.opts.Now,
		Logger:   a.log,
	}
	if clustered(a.cfg) {
		// Per-process series by replica; the database's from the
		// maintenance lease's holder only.
		o.Replica, o.Exports = a.db.Holder(), a.holdsMaintenance
	}
	return metrics.New(o)
}

// channelStatuses is each channel's liveness: running (not being
// restarted) and, where the channel says, connected to its platform.
func (a *App) channelStatuses() []metrics.ChannelStatus {
	var out []metrics.ChannelStatus
	chans := map[string]core.Channel{}
	for _, ch := range a.gateway.Channels() {
		chans[ch.Name()] = ch
	}
	for _, st := range a.gateway.ChannelStates() {
		cs := metrics.ChannelStatus{Name: st.Name, Up: st.Err == nil, Restarts: st.Restarts}
		if hr, ok := chans[st.Name].(core.HealthReporter); ok {
			cs.Up = cs.Up && hr.Healthy() == nil
		}
		// The platforms' HealthReporter, and the console, which reports
		// only when it last read a line.
		if le, ok := chans[st.Name].(interface{ LastEvent() time.Time }); ok {
			cs.LastEvent = le.LastEvent()
		}
		out = append(out, cs)
	}
	return out
}

// profileStatuses is every auth profile's cooldown, from the router.
func (a *App) profileStatuses() []metrics.ProfileStatus {
	var out []metrics.ProfileStatus
	for _, prov := range slices.Sorted(maps.Keys(a.cfg.Models.Providers)) {
		for _, p := range a.router.Profiles(prov) {
			out = append(out, metrics.ProfileStatus{Provider: prov, ID: p.Profile.ID, CooldownUntil: p.CooldownUntil})
		}
	}
	return out
}

// The observers of the packages that emit events: nil interfaces when the
// metrics are off, so those packages skip them.

func (a *App) coreObserver() core.Observer {
	if a.metrics == nil {
		return nil
	}
	return a.metrics
}

func (a *App) routingObserver() routing.Observer {
	if a.health == nil {
		a.health = metrics.NewHealth(a.opts.Now)
	}
	if a.metrics == nil {
		return a.health
	}
	return routingObservers{a.metrics, a.health}
}

// routingObservers tells each of several observers.
type routingObservers []routing.Observer

func (os routingObservers) LLMCall(model, provider, outcome string, d time.Duration) {
	for _, o := range os {
		o.LLMCall(model, provider, outcome, d)
	}
}

func (os routingObservers) Failover(from, to string) {
	for _, o := range os {
		o.Failover(from, to)
	}
}

// timedTools times each tool run for the metrics (stage "tools").
type timedTools struct {
	orchestrator.ToolRunner
	m *metrics.Metrics
}

func (t timedTools) Run(ctx context.Context, call core.ToolCall) core.ToolResult {
	t0 := time.Now()
	defer func() { t.m.ToolRan(time.Since(t0)) }()
	return t.ToolRunner.Run(ctx, call)
}
