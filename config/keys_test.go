package config

import (
	"strings"
	"testing"
	"time"
)

func TestStateRetention(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.State.Retention.D(); got != 7*24*time.Hour {
		t.Errorf("default state.retention = %s, want a week", got)
	}
	cfg, err = Load(writeConfig(t, minimal+"state:\n  retention: 720h\n"), noEnv())
	if err != nil || cfg.State.Retention.D() != 720*time.Hour {
		t.Fatalf("state.retention: 720h = %v (%v)", cfg.State.Retention, err)
	}
	if cfg, err = Load(writeConfig(t, minimal+"state:\n  retention: 0\n"), noEnv()); err != nil || cfg.State.Retention != 0 {
		t.Fatalf("state.retention: 0 (forever) = %v (%v)", cfg.State.Retention, err)
	}
	_, err = Load(writeConfig(t, minimal+"state:\n  retention: 10m\n"), noEnv())
	ps := problemsOf(t, err)
	if len(ps) != 1 {
		t.Fatalf("want 1 problem, got %v", err)
	}
	mustContain(t, err.Error(), "config.yaml:10", "state.retention", "at least \"1h\"")
}

func TestCatalogMaxOutputTokens(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal), noEnv())
	if err != nil || cfg.Models.Catalog["fake/big"].MaxOutputTokens != 0 {
		t.Fatalf("default: %v", err)
	}
	body := `models:
  providers:
    fake: { api: openai-completions, base_url: "http://127.0.0.1:9/v1" }
  catalog:
    fake/big: { weight: 10, max_output_tokens: 2048 }
    fake/small: { weight: 90, context_window: 4000, max_output_tokens: 4000 }
    fake/neg: { weight: 5, max_output_tokens: -1 }
`
	_, err = Load(writeConfig(t, body), noEnv())
	if ps := problemsOf(t, err); len(ps) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
	mustContain(t, err.Error(), "models.catalog.fake/small.max_output_tokens: 4000 does not leave room", "models.catalog.fake/neg.max_output_tokens: must not be negative")
	ok := strings.NewReplacer("    fake/neg: { weight: 5, max_output_tokens: -1 }\n", "", "max_output_tokens: 4000", "max_output_tokens: 1000").Replace(body)
	if cfg, err = Load(writeConfig(t, ok), noEnv()); err != nil || cfg.Models.Catalog["fake/big"].MaxOutputTokens != 2048 {
		t.Fatalf("valid max_output_tokens: %v", err)
	}
}
