package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
	"github.com/opentalon/opentalon/store/pgtest"
)

// TestE2ECompleteOnPostgres: `complete` with state.driver: postgres
// records its call in the PostgreSQL database, where `usage` (and the
// cluster's budgets) read it, and leaves no SQLite file of its own in the
// data directory (issue 22: every store operation on PostgreSQL).
func TestE2ECompleteOnPostgres(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	data := filepath.Join(t.TempDir(), "data")
	path := writeConfig(t, pgConfig(data, llm.BaseURL(), pgtest.DSN(t), "postgres"))

	if res := runMain(t, nil, "", "--config", path, "complete", "say hi"); res.code != 0 {
		t.Fatalf("complete on PostgreSQL: exit %d\n%s", res.code, res.stderr)
	}
	res := runMain(t, nil, "", "--config", path, "usage", "--by", "purpose")
	if res.code != 0 || !strings.Contains(res.stdout, "complete") {
		t.Fatalf("usage on PostgreSQL after complete: exit %d; want the complete call counted\n%s%s", res.code, res.stdout, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, store.FileName)); err == nil {
		t.Errorf("complete on PostgreSQL created %s", filepath.Join(data, store.FileName))
	}
}
