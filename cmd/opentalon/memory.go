package main

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/store"
)

// buildAgent builds the orchestrator with the session state, compaction,
// long-term and workflow memory and orchestration steps of the config.
func (a *App) buildAgent(tools orchestrator.ToolRunner, now func() time.Time) (*orchestrator.Orchestrator, error) {
	cfg := a.cfg
	steps, err := compileSteps(cfg.Orchestrator.Steps)
	if err != nil {
		return nil, err
	}
	model := cfg.State.Compaction.Model
	if model == "" {
		model = a.router.CheapestModel()
	}
	mem := cfg.State.Memory
	return orchestrator.New(orchestrator.Options{
		LLM:        a.router,
		Tools:      tools,
		History:    a.db,
		Store:      a.db,
		Generator:  a.router,
		Compaction: orchestrator.Compaction{Model: model, Notify: cfg.State.Compaction.Notify},
		Memory:     orchestrator.Memory{Tools: mem.Tools, RecallTokens: mem.RecallTokens, Workflows: mem.Workflows, Admins: mem.Admins},
		Steps:      steps,
		Rules:      cfg.Orchestrator.Rules,
		MaxSteps:   cfg.Orchestrator.MaxSteps,
		Media:      a.db,
		Logger:     a.log,
		Now:        now,
	}), nil
}

// addMemory registers /compact, /memory and /forget.
func (a *App) addMemory() {
	for _, c := range a.agent.Commands() {
		a.gateway.AddCommand(c)
	}
}

// compileSteps turns orchestrator.steps into the orchestrator's steps.
func compileSteps(in []config.Step) ([]orchestrator.Step, error) {
	out := make([]orchestrator.Step, 0, len(in))
	for i, s := range in {
		re, err := regexp.Compile("(?i)" + s.When)
		if err != nil {
			return nil, fmt.Errorf("orchestrator.steps[%d].when: not a valid Go regular expression: %w", i, err)
		}
		out = append(out, orchestrator.Step{Name: s.Name, When: re, Tools: s.Tools, Sequence: s.Sequence})
	}
	return out, nil
}

// sweepEvery is how often expired sessions are deleted: a tenth of
// state.session_ttl, between a second and ten minutes.
func sweepEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/10, time.Second), 10*time.Minute)
}

// startSessionSweeper deletes sessions idle past state.session_ttl (ttl),
// with their history, now and then every interval until the returned
// stop is called. Without a TTL it does nothing.
func startSessionSweeper(ctx context.Context, db *store.DB, ttl, every time.Duration, log *slog.Logger) (stop func()) {
	if ttl <= 0 {
		return func() {}
	}
	return runEvery(ctx, every, true, func(ctx context.Context) {
		n, err := db.ExpireSessions(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("delete expired sessions", "err", err)
		case n > 0:
			log.Info("deleted sessions idle past state.session_ttl", "sessions", n, "state.session_ttl", ttl.String())
		}
	})
}
