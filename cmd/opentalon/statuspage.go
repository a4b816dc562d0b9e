package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/metrics"
	"github.com/opentalon/opentalon/metrics/status"
	"github.com/opentalon/opentalon/routing"
)

// loopbackOnly says server.listen binds a loopback address only, so the
// status page and /metrics need no API key.
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// mountOps serves the status page at GET / with its JSON API, and
// GET /metrics when the metrics are on; both behind the API key unless the
// server listens on loopback only.
func (a *App) mountOps(mux *http.ServeMux) {
	page := status.New(status.Options{
		Store:       a.db,
		Channels:    a.statusChannels,
		Credentials: a.statusCredentials,
		Models:      a.statusModels,
		Plugins:     a.statusPlugins,
		Scripts:     a.statusScripts,
		Cluster:     a.statusCluster,
		Score: func(af core.Affinity, now time.Time) (float64, float64) {
			s := routing.ScoreOf(af, now, float64(a.cfg.Routing.Affinity.DecayDays))
			return s.Score, s.Evidence
		},
		Choices: a.statusChoices,
		Version: Version,
		Started: a.opts.Now(),
		APIKey:  a.cfg.Server.APIKey.Value(),
		Open:    loopbackOnly(a.cfg.Server.Listen),
		Listen:  a.cfg.Server.Listen,
		Now:     a.opts.Now,
		Logger:  a.log,
	})
	page.Mount(mux)
	if a.metrics != nil {
		mux.Handle("GET /metrics", page.Protect(a.metrics.Handler()))
	}
	if !loopbackOnly(a.cfg.Server.Listen) && !a.cfg.Server.APIKey.IsSet() {
		a.log.Warn("server.listen is reachable beyond this machine and server.api_key is not set: the status page and /metrics refuse every request until it is", "server.listen", a.cfg.Server.Listen)
	}
}

func (a *App) statusChannels() []status.Channel {
	var out []status.Channel
	chans := map[string]core.Channel{}
	for _, ch := range a.gateway.Channels() {
		chans[ch.Name()] = ch
	}
	for _, st := range a.gateway.ChannelStates() {
		c := status.Channel{Name: st.Name, Up: st.Err == nil, Restarts: st.Restarts}
		if st.Err != nil {
			c.Error = "stopped and restarting: " + st.Err.Error()
		}
		if hr, ok := chans[st.Name].(core.HealthReporter); ok {
			if err := hr.Healthy(); err != nil && c.Up {
				c.Up, c.Error = false, err.Error()
			}
		}
		// The platforms' HealthReporter, and the console, which reports
		// only when it last read a line.
		if le, ok := chans[st.Name].(interface{ LastEvent() time.Time }); ok {
			if t := le.LastEvent(); !t.IsZero() {
				c.LastEvent = &t
			}
		}
		out = append(out, c)
	}
	return out
}

func (a *App) statusCredentials() []status.Credential {
	var out []status.Credential
	now := a.opts.Now()
	for _, prov := range slices.Sorted(maps.Keys(a.cfg.Models.Providers)) {
		for _, p := range a.router.Profiles(prov) {
			c := status.Credential{Provider: prov, Profile: p.Profile.ID, Uses: p.Uses, LastError: p.LastError}
			if p.CooldownUntil.After(now) {
				t := p.CooldownUntil
				c.CoolingUntil = &t
			}
			if h := a.health.Provider(prov); h.State() == "failing" {
				c.Failing = fmt.Sprintf("%s in the last %d minutes", healthLine(h), int(metrics.HealthWindow.Minutes()))
			}
			out = append(out, c)
		}
	}
	return out
}

// statusModels is each model's recent calls (metrics.Health).
func (a *App) statusModels() []status.Model {
	var out []status.Model
	for _, m := range a.health.Models() {
		sm := status.Model{Model: m.Model, Provider: m.Provider, Calls: m.Calls, State: m.State(), Failures: m.Failures}
		if !m.LastFailure.IsZero() {
			t := m.LastFailure
			sm.LastFailure = &t
		}
		out = append(out, sm)
	}
	return out
}

// statusPlugins is each plugin the manager reported, with its restarts
// (from the metrics' view of the manager's events) or, without metrics,
// the running ones.
func (a *App) statusPlugins() []status.Plugin {
	var out []status.Plugin
	if a.metrics != nil {
		health := a.metrics.PluginHealth()
		for _, name := range slices.Sorted(maps.Keys(health)) {
			out = append(out, status.Plugin{Name: name, Up: health[name].Up, Restarts: health[name].Restarts})
		}
		return out
	}
	for _, c := range a.registry.ListCapabilities() {
		out = append(out, status.Plugin{Name: c.Name, Up: true})
	}
	return out
}

// statusScripts lists the Lua scripts for the status page: a script whose
// last runs failed in a row is shown unhealthy (it keeps running); one
// whose file on disk does not compile shows the error beside the version
// that keeps running; a file that never compiled is not loaded, and
// unhealthy.
func (a *App) statusScripts() []status.Script {
	if a.lua == nil {
		return nil
	}
	var out []status.Script
	for _, s := range a.lua.Scripts() {
		sc := status.Script{Name: s.Name, Healthy: s.Failures < 3, Loaded: s.Loaded, Version: s.Version, ReloadError: s.ReloadError}
		if !s.Modified.IsZero() {
			sc.Modified = &s.Modified
		}
		switch {
		case !s.Loaded:
			sc.Healthy = false
			sc.Error = fmt.Sprintf("not loaded: %s; fix %s (it loads once it compiles)", s.ReloadError, s.File)
		case !sc.Healthy:
			sc.Error = fmt.Sprintf("its last %d runs failed (last: %s); fix %s", s.Failures, s.LastError, s.File)
		}
		out = append(out, sc)
	}
	return out
}

// statusChoices is the router's explanation of its choice for each task
// type that has evidence.
func (a *App) statusChoices(ctx context.Context) []status.Choice {
	var out []status.Choice
	for _, e := range a.router.ExplainAll(ctx) {
		out = append(out, status.Choice{Task: e.Task, Model: e.Model, State: e.State, Why: e.String()})
	}
	return out
}
