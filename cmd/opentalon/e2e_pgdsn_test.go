package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2ESQLiteNeedsNoPostgresDSNVariable: a config on SQLite (the
// default driver) that already names its PostgreSQL DSN by a variable,
// as the README's example does, starts while that variable is not set, as
// a disabled channel's token does; only state migrate, which needs the
// DSN, asks for it.
func TestE2ESQLiteNeedsNoPostgresDSNVariable(t *testing.T) {
	if os.Getenv(envTestDriver) != "" {
		t.Skip("on SQLite on purpose")
	}
	llm := providertest.NewOpenAI(t)
	yaml := strings.Replace(testConfig(filepath.Join(t.TempDir(), "data"), llm.BaseURL(), ""), "state:\n",
		"state:\n  postgres:\n    dsn: \"${OPENTALON_POSTGRES_DSN}\"\n", 1)
	path := writeConfig(t, yaml)
	if res := runMain(t, nil, "", "--config", path, "config", "check"); res.code != 0 {
		t.Fatalf("config check on SQLite without OPENTALON_POSTGRES_DSN: exit %d\n%s", res.code, res.stderr)
	}
	res := runMain(t, nil, "", "--config", path, "state", "migrate", "--from", "sqlite", "--to", "postgres")
	if res.code != 1 || !strings.Contains(res.stderr, "state.postgres.dsn") || !strings.Contains(res.stderr, "environment variable") {
		t.Fatalf("state migrate without the DSN's variable: exit %d\n%s", res.code, res.stderr)
	}
}
