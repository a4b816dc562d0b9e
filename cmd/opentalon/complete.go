package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/orchestrator"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/store"
)

// cmdComplete answers one prompt and exits (the per-request model override
// of seed 004). The answer is streamed to stdout as it arrives.
func cmdComplete(ctx context.Context, g *globalFlags, args []string, io Stdio, env config.Env, log *slog.Logger) error {
	var model string
	var noStream bool
	rest, err := parseSub("complete", g, args, io, func(fs *flag.FlagSet) {
		fs.StringVar(&model, "model", "", "model reference or alias for this request")
		fs.BoolVar(&noStream, "no-stream", false, "print the answer only when complete")
	})
	if err != nil {
		return err
	}
	prompt := strings.TrimSpace(strings.Join(rest, " "))
	if prompt == "" {
		return usageError{`complete: missing the PROMPT; usage: opentalon complete [--model REF] "prompt"`}
	}
	// Only the keys it uses: a channel's token left unset does not stop
	// it. The built-in default (no file) says what to export when it
	// finds no provider.
	cfg, src, err := config.OpenFor(g.config, env, "state", "models", "routing", "auth", "llm", "orchestrator", "timezone")
	if err != nil && src.Kind == config.SourceDefault {
		_, _, err = loadConfig(g, env)
	}
	if err != nil {
		return err
	}
	knowModel(cfg, model)
	// The call is recorded where the gateway's are (state.driver): on
	// PostgreSQL the cluster's usage and budgets count it.
	db, err := openStoreToWrite(ctx, cfg, store.Options{Logger: log})
	if err != nil {
		return err
	}
	defer db.Close()
	router, err := buildRouter(cfg, db, nil, log, nil)
	if err != nil {
		return err
	}
	call := routing.Call{
		Purpose:      "complete",
		Conversation: core.ConversationKey{Channel: "cli", Chat: "complete"},
		Model:        model,
		Req: provider.Request{
			System:   orchestrator.SystemPrompt(cfg.Orchestrator.Rules),
			Messages: []core.ChatMessage{{Role: core.RoleUser, Content: prompt}},
		},
	}
	streamed := false
	if !noStream {
		call.OnText = func(d string) { streamed = true; fmt.Fprint(io.Out, d) }
	}
	res, err := router.Chat(ctx, call)
	if err != nil {
		return withProviderFix(ctx, cfg, err)
	}
	if strings.TrimSpace(res.Text) == "" {
		// As the gateway does: an empty answer is no answer (a model that
		// asked only for tools, which complete does not run, or a server
		// that sent nothing), not a blank line and success.
		if streamed {
			fmt.Fprintln(io.Out)
		}
		what := "an empty answer"
		if len(res.ToolCalls) > 0 {
			what = fmt.Sprintf("only tool calls (%d), which complete does not run", len(res.ToolCalls))
		}
		return fmt.Errorf("model %s returned %s; try again, or another model with --model", res.Model, what)
	}
	if !streamed {
		fmt.Fprint(io.Out, res.Text)
	}
	fmt.Fprintln(io.Out)
	log.Info("answered", "model", res.Model, "reason", res.Reason, "input_tokens", res.Usage.InputTokens, "output_tokens", res.Usage.OutputTokens)
	return nil
}

// knowModel makes a "<provider>/<model>" of a configured provider usable
// for this request when neither the catalog nor the provider's models
// list names it, as it is in routing.primary (a model an Ollama or vLLM
// server serves): the provider lists it, so the router knows it.
func knowModel(cfg *config.Config, ref string) {
	canonical, ok := cfg.ResolveModel(ref)
	if !ok {
		return
	}
	if _, listed := cfg.Models.Catalog[canonical]; listed {
		return
	}
	pid, mid, _ := strings.Cut(canonical, "/")
	p := cfg.Models.Providers[pid]
	if slices.ContainsFunc(p.Models, func(m config.ProviderModel) bool { return m.ID == mid }) {
		return
	}
	p.Models = append(slices.Clone(p.Models), config.ProviderModel{ID: mid, Name: mid, Input: []string{"text"}})
	cfg.Models.Providers[pid] = p
}

// withProviderFix replaces a failed answer's error with what run's start-up
// check says when every provider cannot be reached or refuses the
// credential: the router's error names config keys
// (models.providers.<id>.base_url) that a built-in default from the
// environment does not have, while the check names the variable to set.
// It asks only after a failure, so an answer costs no extra request.
func withProviderFix(ctx context.Context, cfg *config.Config, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var fatal []providerProblem
	for _, p := range checkProviders(ctx, cfg, providerCheckTimeout) {
		if p.Fatal {
			fatal = append(fatal, p)
		}
	}
	if fixed := everyProviderFails(cfg, fatal); fixed != nil {
		return fixed
	}
	return err
}
