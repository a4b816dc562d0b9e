package main

// One gateway per data directory: the real binary started twice on one
// state.data_dir, and the read-only commands beside a running gateway.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestE2ESecondRunOnOneDataDirExits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	path := writeConfig(t, testConfig(dir, llm.BaseURL(), ""))

	first := startBinary(t, nil, "--config", path, "run")
	first.send("hello")
	first.waitLine("echo: hello")

	second := startBinary(t, nil, "--config", path, "run")
	if code := second.exitCode(30 * time.Second); code == 0 || code == -1 {
		t.Fatalf("second run on one data_dir: exit code %d, want a non-zero exit; stderr:\n%s", code, second.stderr.String())
	}
	msg := second.stderr.String()
	for _, want := range []string{"another opentalon instance", fmt.Sprintf("PID %d", first.cmd.Process.Pid), dir, "stop it first, or give this one another state.data_dir"} {
		if !strings.Contains(msg, want) {
			t.Errorf("second run's error does not say %q:\n%s", want, msg)
		}
	}

	// Read-only commands work while the gateway runs.
	for _, args := range [][]string{
		{"--config", path, "usage"},
		{"--config", path, "affinity", "show"},
		{"--config", path, "config", "check"},
		{"--config", path, "queue"},
	} {
		if res := runMain(t, nil, "", args...); res.code != 0 {
			t.Errorf("%v while the gateway runs: exit %d, stderr %s", args[2:], res.code, res.stderr)
		}
	}

	// A reset of what the router learned is refused: the running gateway
	// keeps it in memory and would write it back.
	if res := runMain(t, nil, "", "--config", path, "affinity", "reset"); res.code != 1 ||
		!strings.Contains(res.stderr, "affinity reset refused: another opentalon instance") || !strings.Contains(res.stderr, "would not hold") {
		t.Errorf("affinity reset while the gateway runs: exit %d\n%s", res.code, res.stderr)
	}
	// So are restore and state migrate, and they are told to stop the
	// gateway only: the database they work on is this directory's, so
	// "another state.data_dir" would send them to the wrong one.
	bk := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(bk, []byte("not looked at"), 0o600); err != nil {
		t.Fatal(err)
	}
	// state migrate takes the lock before it connects: the server is
	// never reached.
	dsn := map[string]string{"OPENTALON_POSTGRES_DSN": "postgres://opentalon@127.0.0.1:1/opentalon"}
	for _, args := range [][]string{{"affinity", "reset"}, {"restore", bk}, {"state", "migrate", "--from", "sqlite", "--to", "postgres"}} {
		res := runMain(t, dsn, "", append([]string{"--config", path}, args...)...)
		if res.code != 1 || !strings.Contains(res.stderr, "stop it first") || strings.Contains(res.stderr, "another state.data_dir") {
			t.Errorf("%v while the gateway runs: exit %d\n%s; want it told to stop the gateway, not to use another state.data_dir", args, res.code, res.stderr)
		}
	}

	// The first gateway is untouched and, once it stops, the directory is
	// free for the next start.
	first.send("still here")
	first.waitLine("echo: still here")
	first.closeInput()
	if code := first.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("first run: exit code %d; stderr:\n%s", code, first.stderr.String())
	}
	if res := runMain(t, nil, "", "--config", path, "affinity", "reset"); res.code != 0 {
		t.Errorf("affinity reset once the gateway stopped: exit %d\n%s", res.code, res.stderr)
	}
	third := startBinary(t, nil, "--config", path, "run")
	third.send("third start")
	third.waitLine("echo: third start")
	third.closeInput()
	if code := third.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("run after the first stopped: exit code %d; stderr:\n%s", code, third.stderr.String())
	}
}
