package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes body to config.yaml in a fresh directory.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// minimal is a valid config with one provider; tests append to it.
const minimal = `models:
  providers:
    fake: { api: openai-completions, base_url: "http://127.0.0.1:9/v1" }
  catalog:
    fake/big: { alias: big, weight: 10 }
    fake/small: { alias: small, weight: 90 }
routing:
  primary: fake/small
`

// problemsOf returns the problems of a Load error, failing when there are none.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got none")
	}
	var e *Errors
	if !errors.As(err, &e) {
		t.Fatalf("error is not *Errors: %v", err)
	}
	return e.Problems
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("missing %q in:\n%s", p, s)
		}
	}
}

func noEnv() Env { return MapEnv(map[string]string{"HOME": "/home/tester"}) }
