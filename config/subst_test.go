package config

import "testing"

// TestSubstitutedValueStaysAString: a variable whose value YAML would
// read as null ("null", "~", "Null", "NULL") fills a string key with that
// text; a secret is never silently emptied. Numbers and booleans still
// fill typed keys.
func TestSubstitutedValueStaysAString(t *testing.T) {
	body := `models:
  providers:
    fake:
      api: openai-completions
      base_url: "http://127.0.0.1:9/v1"
      api_key: ${KEY}
      headers: { X-Token: "${TOKEN}" }
  catalog:
    fake/small: { weight: 90 }
queue:
  workers: ${WORKERS}
channels:
  console:
    enabled: ${CONSOLE}
`
	for _, v := range []string{"null", "~", "Null", "NULL", "true", "0x10", "1e3"} {
		env := MapEnv(map[string]string{"HOME": "/h", "KEY": v, "TOKEN": v, "WORKERS": "3", "CONSOLE": "false"})
		cfg, err := Load(writeConfig(t, body), env)
		if err != nil {
			t.Fatalf("KEY=%s: %v", v, err)
		}
		p := cfg.Models.Providers["fake"]
		if got := p.APIKey.Value(); got != v {
			t.Errorf("KEY=%s: api_key = %q, want %q", v, got, v)
		}
		if got := p.Headers["X-Token"].Value(); got != v {
			t.Errorf("TOKEN=%s: header = %q, want %q", v, got, v)
		}
		if cfg.Queue.Workers != 3 || cfg.Channels.Console.Enabled {
			t.Errorf("typed keys from variables: workers %d, console %v", cfg.Queue.Workers, cfg.Channels.Console.Enabled)
		}
	}
	// A number key given a variable that reads as null is an error, not a
	// silent default.
	_, err := Load(writeConfig(t, minimal+"queue:\n  workers: ${WORKERS}\n"), MapEnv(map[string]string{"HOME": "/h", "WORKERS": "~"}))
	if len(problemsOf(t, err)) != 1 {
		t.Fatalf("want 1 problem, got %v", err)
	}
	mustContain(t, err.Error(), "config.yaml:10", "queue.workers")
}
