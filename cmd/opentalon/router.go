package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/metrics"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/store"
)

// buildProviders makes one client per models.providers entry; an api:
// plugin provider calls its plugin through ext (nil outside opentalon
// run: such a provider is then unavailable).
func buildProviders(cfg *config.Config, log *slog.Logger, now func() time.Time, ext *plugins.Extensions) (map[string]provider.Provider, error) {
	out := map[string]provider.Provider{}
	for id, p := range cfg.Models.Providers {
		headers := map[string]string{}
		for k, v := range p.Headers {
			headers[k] = v.Value()
		}
		timeout := p.Timeout.D()
		if timeout <= 0 {
			timeout = config.ProviderTimeout
		}
		o := provider.Options{ID: id, BaseURL: p.BaseURL, Headers: headers, Timeout: timeout, Logger: log, Now: now,
			IdleConns: cfg.LLM.MaxConcurrentCloud}
		if p.IsLocal() {
			o.IdleConns = cfg.LLM.MaxConcurrentLocal
		}
		switch p.API {
		case config.APIOpenAICompletions:
			out[id] = provider.NewOpenAI(o)
		case config.APIAnthropicMessages:
			out[id] = provider.NewAnthropic(o)
		case config.APIPlugin:
			out[id] = pluginProvider{id: id, plugin: p.Plugin, timeout: timeout, ext: ext}
		default:
			return nil, fmt.Errorf("models.providers.%s.api: %q is not supported; use %s or %s", id, p.API, config.APIOpenAICompletions, config.APIAnthropicMessages)
		}
	}
	return out, nil
}

// catalogFromConfig lists every model the router may use: the catalog
// entries, with cost and context window filled from the provider's models
// list where the entry leaves them out, plus provider models that have
// no catalog entry (weight 0, so they are only used when named).
func catalogFromConfig(cfg *config.Config) []routing.Model {
	var out []routing.Model
	seen := map[string]bool{}
	pm := func(ref string) (config.ProviderModel, config.Provider) {
		pid, mid, _ := strings.Cut(ref, "/")
		p := cfg.Models.Providers[pid]
		for _, m := range p.Models {
			if m.ID == mid {
				return m, p
			}
		}
		return config.ProviderModel{}, p
	}
	for _, ref := range slices.Sorted(maps.Keys(cfg.Models.Catalog)) {
		e := cfg.Models.Catalog[ref]
		m, p := pm(ref)
		rm := routing.Model{Ref: ref, Alias: e.Alias, Weight: e.Weight, CostIn: m.Cost.Input, CostOut: m.Cost.Output,
			ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxTokens, Local: p.IsLocal(), Capabilities: modelCapabilities(e, m)}
		if e.MaxOutputTokens > 0 {
			rm.MaxOutputTokens = e.MaxOutputTokens
		}
		if e.Cost != nil {
			rm.CostIn, rm.CostOut = e.Cost.Input, e.Cost.Output
		}
		if e.ContextWindow > 0 {
			rm.ContextWindow = e.ContextWindow
		}
		out = append(out, rm)
		seen[ref] = true
	}
	for _, id := range slices.Sorted(maps.Keys(cfg.Models.Providers)) {
		p := cfg.Models.Providers[id]
		for _, m := range p.Models {
			ref := id + "/" + m.ID
			if seen[ref] {
				continue
			}
			seen[ref] = true
			out = append(out, routing.Model{Ref: ref, CostIn: m.Cost.Input, CostOut: m.Cost.Output, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxTokens, Local: p.IsLocal(),
				Capabilities: modelCapabilities(config.CatalogEntry{}, m)})
		}
	}
	// Model references the config names as "<provider>/<model>" without a
	// catalog entry or a provider models entry are usable too (a model an
	// Ollama or vLLM server serves); they get weight 0, so only the rule
	// that names them picks them.
	var extra []string
	for _, mr := range cfg.ModelRefs() {
		if ref, ok := cfg.ResolveModel(mr.Ref); ok {
			extra = append(extra, ref)
		}
	}
	sort.Strings(extra)
	for _, ref := range extra {
		if !seen[ref] {
			seen[ref] = true
			pid, _, _ := strings.Cut(ref, "/")
			out = append(out, routing.Model{Ref: ref, Local: cfg.Models.Providers[pid].IsLocal()})
		}
	}
	return out
}

// profilesPath is auth.profiles_file, or its default in the data
// directory.
func profilesPath(cfg *config.Config) string {
	if cfg.Auth.ProfilesFile != "" {
		return cfg.Auth.ProfilesFile
	}
	return filepath.Join(cfg.State.DataDir, "auth-profiles.json")
}

// authProfiles reads the profiles file (profilesPath): none when the
// default one does not exist.
func authProfiles(cfg *config.Config) (map[string][]routing.Profile, error) {
	loaded, err := routing.LoadProfilesFile(profilesPath(cfg))
	if err != nil {
		if cfg.Auth.ProfilesFile == "" && errors.Is(err, fs.ErrNotExist) {
			return map[string][]routing.Profile{}, nil
		}
		return nil, err
	}
	return loaded, nil
}

// buildRouter maps the config onto routing.Options.
func buildRouter(cfg *config.Config, db *store.DB, now func() time.Time, log *slog.Logger, obs routing.Observer) (*routing.Router, error) {
	return buildRouterWith(cfg, db, now, log, obs, nil, nil, nil)
}

// buildRouterWith is buildRouter with the running plugins (for api:
// plugin providers), the operator events and what a provider back wakes
// (routing.Options.OnBack).
func buildRouterWith(cfg *config.Config, db *store.DB, now func() time.Time, log *slog.Logger, obs routing.Observer, ext *plugins.Extensions, events core.OpsEvents, onBack func(provider string)) (*routing.Router, error) {
	providers, err := buildProviders(cfg, log, now, ext)
	if err != nil {
		return nil, err
	}
	profiles, err := authProfiles(cfg)
	if err != nil {
		return nil, err
	}
	for id, p := range cfg.Models.Providers {
		if p.APIKey.IsSet() && len(profiles[id]) == 0 {
			profiles[id] = []routing.Profile{{ID: id + ":default", Provider: id, Key: core.Secret(p.APIKey.Value())}}
		}
	}
	if j := cfg.Routing.Judge; j.Model != "" && j.Rate == 0 {
		log.Info("routing.judge.rate is 0: the judge grades no answer (its model stays unused)", "routing.judge.model", j.Model)
	}
	channelModels, chatModels := channelModels(cfg)
	cd := cfg.Auth.Cooldowns
	return routing.New(routing.Options{
		Providers:          providers,
		Catalog:            catalogFromConfig(cfg),
		Primary:            cfg.Routing.Primary,
		Fallbacks:          cfg.Routing.Fallbacks,
		Pin:                cfg.Routing.Pin,
		Allowed:            cfg.Routing.Allowed,
		ChatModels:         chatModels,
		ChannelModels:      channelModels,
		NoAffinity:         !cfg.Routing.Affinity.Enabled,
		DecayDays:          float64(cfg.Routing.Affinity.DecayDays),
		EscalateOnReaction: cfg.Routing.EscalateOnReaction,
		MaxEscalations:     cfg.Routing.MaxEscalations,
		NoEscalation:       cfg.Routing.MaxEscalations == 0,
		DailyUSD:           cfg.Routing.Budget.DailyUSD,
		ChatDailyUSD:       cfg.Routing.Budget.ChatDailyUSD,
		Profiles:           profiles,
		AuthOrder:          cfg.Auth.Order,
		Cooldowns: routing.Cooldowns{Initial: cd.Initial.D(), Multiplier: cd.Multiplier, Max: cd.Max.D(),
			BillingMax: time.Duration(cd.BillingMaxHours) * time.Hour},
		MaxLocal: cfg.LLM.MaxConcurrentLocal,
		MaxCloud: cfg.LLM.MaxConcurrentCloud,
		// routing.cost_weight 0 means "ignore cost" (Options: negative).
		CostWeight: cmp.Or(cfg.Routing.CostWeight, -1),
		Probe: routing.Probing{Off: cfg.Routing.Explore.Rate == 0, Rate: cfg.Routing.Explore.Rate,
			DailyUSD: cfg.Routing.Explore.DailyUSD, StaleAfter: cfg.Routing.Explore.StaleAfter.D()},
		Judge:    judging(cfg.Routing.Judge),
		Store:    db,
		Observer: obs,
		Now:      now,
		Log:      log,
		Events:   events,
		// Replicas share cooldowns and the probes' spend through the
		// database, read every second.
		SharedProfiles: sharedEvery(cfg),
		OnBack:         onBack,
	})
}

// addRouting registers the /model family, /retry and the escalation
// interceptor (rejections re-answered by the next model).
func (a *App) addRouting() {
	for _, c := range a.router.Commands(a.db, a.db) {
		if c.Name == "models" && a.health != nil {
			c.Run = withHealth(c.Run, a.health)
		}
		a.gateway.AddCommand(c)
	}
	a.gateway.AddInterceptor(routing.NewEscalator(a.router, a.db, a.log))
}

// startRouterHousekeeping has the router record, every 10 minutes, the
// answers nothing followed (routing's abandonment sweep) and write its
// learning state; stop waits for the judge's grades in flight and writes
// the state once more, so a restart continues what the router was
// noticing.
func (a *App) startRouterHousekeeping(ctx context.Context) (stop func()) {
	stopRun := runEvery(ctx, 10*time.Minute, false, func(ctx context.Context) {
		if n, err := a.router.SweepAbandoned(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("record answers left without a verdict", "err", err)
		} else if n > 0 {
			a.log.Debug("recorded answers left without a verdict", "answers", n)
		}
		if err := a.router.SaveState(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("write the router's learning state", "err", err)
		}
	})
	return func() {
		stopRun()
		if err := a.router.Drain(context.Background()); err != nil {
			a.log.Warn("write the router's learning state at shutdown", "err", err)
		}
	}
}

// withHealth adds to /models how the recent calls of each model went
// (metrics.Health): a provider that fails every call shows there even
// while its credentials are not cooling.
func withHealth(run core.CommandFunc, h *metrics.Health) core.CommandFunc {
	return func(ctx context.Context, req core.CommandRequest) (string, error) {
		out, err := run(ctx, req)
		if err != nil {
			return out, err
		}
		ms := h.Models()
		if len(ms) == 0 {
			return out, nil
		}
		var b strings.Builder
		b.WriteString(out)
		fmt.Fprintf(&b, "\nIn the last %d minutes:", int(metrics.HealthWindow.Minutes()))
		for _, m := range ms {
			fmt.Fprintf(&b, "\n  %s — %s", m.Model, healthLine(m))
		}
		return b.String(), nil
	}
}

// healthLine says how a model's (or provider's) recent calls went:
// "3 calls, all failed (unavailable ×3)".
func healthLine(m metrics.ModelHealth) string {
	calls := fmt.Sprintf("%d call", m.Calls)
	if m.Calls != 1 {
		calls += "s"
	}
	switch m.State() {
	case "ok":
		return calls + ", all answered"
	case "failing":
		return calls + ", all failed (" + failureKinds(m.Failures) + ")"
	}
	return fmt.Sprintf("%s, %d failed (%s)", calls, m.Failed(), failureKinds(m.Failures))
}

// failureKinds is "unavailable ×3, rate_limited ×1", the commonest first.
func failureKinds(f map[string]int) string {
	kinds := slices.Sorted(maps.Keys(f))
	slices.SortStableFunc(kinds, func(a, b string) int { return f[b] - f[a] })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s ×%d", k, f[k])
	}
	return strings.Join(parts, ", ")
}

// judging is routing.judge for the router: off without a model, and off
// with rate 0 (the router would take a rate of 0 for its default).
func judging(j config.Judge) routing.Judging {
	if j.Model == "" || j.Rate == 0 {
		return routing.Judging{}
	}
	return routing.Judging{Model: j.Model, Rate: j.Rate, DailyUSD: j.DailyUSD}
}
