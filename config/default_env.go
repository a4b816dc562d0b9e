package config

import (
	_ "embed"
	"os"

	"github.com/opentalon/opentalon/core"
)

//go:embed default.yaml
var defaultYAML []byte

// Default models of the zero-config start; OPENTALON_MODEL overrides each.
const (
	DefaultAnthropicModel = "claude-sonnet-4-5"
	DefaultOpenAIModel    = "gpt-4o-mini"
	// DefaultLocalModel is used for OPENAI_BASE_URL servers (Ollama, vLLM)
	// when OPENTALON_MODEL is unset; pull it first (ollama pull llama3.2)
	// or set OPENTALON_MODEL to a model the server has.
	DefaultLocalModel = "llama3.2"
)

// errNoProvider explains how to configure an LLM when none was found.
const errNoProvider = "no LLM provider configured and no config file found. Do one of:\n" +
	"  export ANTHROPIC_API_KEY=...   (Anthropic, model " + DefaultAnthropicModel + ")\n" +
	"  export OPENAI_API_KEY=...      (OpenAI, model " + DefaultOpenAIModel + ")\n" +
	"  export OPENAI_BASE_URL=http://localhost:11434/v1   (any OpenAI-compatible server such as Ollama or vLLM; model " + DefaultLocalModel + ")\n" +
	"  and optionally OPENTALON_MODEL=<model id>;\n" +
	"or write a config file (--config FILE, $OPENTALON_CONFIG or ~/.opentalon/config.yaml) that sets models.providers.<id> and routing.primary; see examples/config.yaml"

// LoadDefault builds the embedded default config: console on, state under
// ~/.opentalon (or $OPENTALON_DATA_DIR), and the first provider found in the
// environment: ANTHROPIC_API_KEY, then OPENAI_API_KEY (OPENAI_BASE_URL then
// overrides its endpoint), then OPENAI_BASE_URL alone (key optional).
// OPENTALON_MODEL picks the model. With none of them set it returns a
// core.KindInvalid error naming the variables and config keys to set.
func LoadDefault(env Env) (*Config, error) {
	cfg, ps, ok := loadDefault(env)
	if !ok {
		return nil, core.Errorf(core.KindInvalid, "%s", errNoProvider)
	}
	if err := ps.err(); err != nil {
		return nil, &core.Error{Kind: core.KindInvalid, Err: err}
	}
	return cfg, nil
}

// loadDefault builds the embedded default with its problems; ok is false
// when the environment names no provider (the config then has none).
func loadDefault(env Env) (cfg *Config, ps *problems, ok bool) {
	cfg, ps = decode("(embedded default)", defaultYAML, env)
	if cfg == nil {
		return nil, ps, true
	}
	ok = providerFromEnv(cfg, env)
	wd, _ := os.Getwd()
	cfg.resolvePaths(wd, homeDir(env))
	validate(cfg, ps)
	return cfg, ps, ok
}

func nonEmpty(env Env, name string) string {
	v, _ := env(name)
	return v
}

// providerFromEnv adds one provider, a catalog entry and routing.primary.
func providerFromEnv(cfg *Config, env Env) bool {
	model := nonEmpty(env, "OPENTALON_MODEL")
	baseURL := nonEmpty(env, "OPENAI_BASE_URL")
	var id string
	var p Provider
	switch {
	case nonEmpty(env, "ANTHROPIC_API_KEY") != "":
		id = "anthropic"
		p = Provider{API: APIAnthropicMessages, APIKey: Secret(nonEmpty(env, "ANTHROPIC_API_KEY")), BaseURL: nonEmpty(env, "ANTHROPIC_BASE_URL"),
			KeyVar: "ANTHROPIC_API_KEY", URLVar: "ANTHROPIC_BASE_URL"}
		if model == "" {
			model = DefaultAnthropicModel
		}
	case nonEmpty(env, "OPENAI_API_KEY") != "":
		id = "openai"
		p = Provider{API: APIOpenAICompletions, APIKey: Secret(nonEmpty(env, "OPENAI_API_KEY")), BaseURL: baseURL,
			KeyVar: "OPENAI_API_KEY", URLVar: "OPENAI_BASE_URL"}
		if model == "" {
			model = DefaultOpenAIModel
		}
	case baseURL != "":
		id = "local"
		p = Provider{API: APIOpenAICompletions, BaseURL: baseURL, KeyVar: "OPENAI_API_KEY", URLVar: "OPENAI_BASE_URL"}
		if model == "" {
			model = DefaultLocalModel
		}
	default:
		return false
	}
	p.Timeout = Duration(ProviderTimeout)
	p.Models = []ProviderModel{{ID: model, Name: model, Input: []string{"text"}}}
	ref := id + "/" + model
	cfg.Models.Providers = map[string]Provider{id: p}
	cfg.Models.Catalog = map[string]CatalogEntry{ref: {Weight: 50}}
	cfg.Routing.Primary = ref
	return true
}
