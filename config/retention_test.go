package config

import (
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
