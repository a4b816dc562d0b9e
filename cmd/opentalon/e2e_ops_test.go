package main

// The operator's commands: doctor on a broken and on a sound setup,
// backup while the real binary answers messages, restore refused beside a
// running gateway and done after it stopped.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

func TestE2EDoctorNamesEachProblem(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.RequireKey("the-right-key")
	bot := telegramtest.New(t, tgToken)
	bot.Fail("getMe", telegramtest.Failure{Code: 401, Description: "Unauthorized"})
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	pluginDir := filepath.Join(root, "plugins")
	profiles := filepath.Join(root, "profiles.json")
	for _, d := range []string{dataDir, pluginDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Everyone may write the data dir and the plugin dir; the profiles
	// file is world-readable; the database is not one.
	os.Chmod(dataDir, 0o777)
	os.Chmod(pluginDir, 0o775)
	os.WriteFile(profiles, []byte(`{"fake": [{"id": "fake:a", "key": "k"}]}`), 0o644)
	os.WriteFile(filepath.Join(dataDir, store.FileName), []byte("this is not a database, just text long enough to be read as one"), 0o600)
	cfg := fmt.Sprintf(`state: { data_dir: %q }
models:
  providers:
    fake: { api: openai-completions, base_url: %q, api_key: wrong-key }
    down: { api: openai-completions, base_url: "http://127.0.0.1:1/v1", api_key: k }
  catalog:
    fake/small: { weight: 80 }
    down/m: { weight: 10 }
routing: { primary: fake/small }
auth: { profiles_file: %q }
plugins: { tools: { plugin_dir: %q } }
server: { listen: "" }
channels:
  console: { enabled: false }
  telegram: { enabled: true, token: %q, api_url: %q }
`, dataDir, llm.BaseURL(), profiles, pluginDir, tgToken, bot.URL)
	path := writeConfig(t, cfg)
	res := runMain(t, nil, "", "--config", path, "doctor", "--channels")
	if res.code != 1 {
		t.Fatalf("doctor on a broken setup: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{
		"FAIL  data dir: " + dataDir + " has mode 0777: others can replace the database in it; run: chmod 700",
		"FAIL  database: ",
		"opentalon restore FILE",
		"FAIL  profiles file: auth.profiles_file " + profiles + " has mode 0644",
		"chmod 600 " + profiles,
		"FAIL  plugin dir: " + pluginDir + " has mode 0775",
		"chmod go-w " + pluginDir,
		"FAIL  provider down: down/m:",
		"check models.providers.down.base_url",
		"FAIL  provider fake: fake/small:",
		"check models.providers.fake.api_key",
		"FAIL  channel telegram: telegram refused the bot token",
		"channels.telegram.token",
		"FAIL  start checks: opentalon run would refuse to start: ",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, res.stdout)
		}
	}
	if !strings.Contains(res.stderr, "8 check(s) failed") {
		t.Errorf("doctor's summary: %q", res.stderr)
	}
	if strings.Contains(res.stdout+res.stderr, "wrong-key") || strings.Contains(res.stdout+res.stderr, tgToken) {
		t.Errorf("doctor printed a secret:\n%s%s", res.stdout, res.stderr)
	}
	if n := len(bot.Calls("getMe")); n != 1 {
		t.Errorf("doctor --channels made %d getMe calls, want one", n)
	}

	// Without --channels no platform is called.
	runMain(t, nil, "", "--config", path, "doctor")
	if n := len(bot.Calls("getMe")); n != 1 {
		t.Errorf("doctor without --channels called the platform (%d getMe calls)", n)
	}
}

func TestE2EDoctorOnASoundSetup(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	path := writeConfig(t, testConfig(filepath.Join(dir, "data"), llm.BaseURL(), ""))
	res := runMain(t, nil, "", "--config", path, "doctor", "--channels")
	if res.code != 0 || !strings.Contains(res.stdout, "all checks passed") {
		t.Fatalf("doctor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{"ok    config:", "ok    provider fake: fake/small answered", "ok    channel console: has no credential to check", "ok    database:", "disk space:"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, res.stdout)
		}
	}
	if n := llm.Count(); n != 1 {
		t.Errorf("doctor sent %d requests to the provider, want one tiny request", n)
	}
}

// TestE2EDoctorRunsTheStartChecks: doctor fails what run would refuse at
// start, as config check does — here a Lua script that does not compile,
// named with its line (doctor said "all checks passed" and run then
// exited 78).
func TestE2EDoctorRunsTheStartChecks(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	scripts := filepath.Join(dir, "lua")
	if err := os.Mkdir(scripts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scripts, "10_bad.lua"), []byte("function pre_hook(ctx) return ctx en\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, testConfig(filepath.Join(dir, "data"), llm.BaseURL(), fmt.Sprintf("plugins: { lua: { scripts_dir: %q } }\n", scripts)))
	res := runMain(t, nil, "", "--config", path, "doctor", "--offline")
	if res.code != 1 || !strings.Contains(res.stdout, "FAIL  start checks: opentalon run would refuse to start: ") || !strings.Contains(res.stdout, "10_bad.lua:1") {
		t.Fatalf("doctor with a broken Lua script: exit %d; want 1 and the script's line\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// messageTexts returns the text of every message in the database at path.
func messageTexts(t *testing.T, path string) map[string]bool {
	t.Helper()
	db, err := store.OpenFile(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	if probs, err := db.QuickCheck(context.Background()); err != nil || len(probs) > 0 {
		t.Fatalf("%s: quick_check %v %v", path, probs, err)
	}
	out := map[string]bool{}
	for id := int64(1); id < 500; id++ {
		it, status, err := db.QueueItem(context.Background(), id)
		if err == nil && it.Message != nil && status == core.StatusDone {
			out[it.Message.Text] = true
		}
	}
	return out
}

func TestE2EBackupWhileAnsweringThenRestore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	path := writeConfig(t, testConfig(dir, llm.BaseURL(), ""))
	gw := startBinary(t, nil, "--config", path, "run")
	for i := range 20 {
		gw.send(fmt.Sprintf("before %d", i))
		gw.waitLine(fmt.Sprintf("echo: before %d", i))
	}
	// The gateway is busy with more messages (within queue.max_pending)
	// while the backup is taken.
	for i := range 15 {
		gw.send(fmt.Sprintf("during %d", i))
	}
	backup := filepath.Join(t.TempDir(), "opentalon-backup.db")
	res := runMain(t, nil, "", "--config", path, "backup", backup)
	if res.code != 0 || !strings.Contains(res.stdout, "backed up") {
		t.Fatalf("backup while the gateway runs: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for i := range 15 {
		gw.waitLine(fmt.Sprintf("echo: during %d", i))
	}
	got := messageTexts(t, backup)
	for i := range 20 {
		if !got[fmt.Sprintf("before %d", i)] {
			t.Fatalf("the backup lacks the answered message %q (has %d)", fmt.Sprintf("before %d", i), len(got))
		}
	}

	// A second backup to the same file is refused; restore is refused
	// while the gateway holds the data directory.
	if res := runMain(t, nil, "", "--config", path, "backup", backup); res.code != 1 || !strings.Contains(res.stderr, "already exists") {
		t.Errorf("backup over an existing file: exit %d %q", res.code, res.stderr)
	}
	res = runMain(t, nil, "", "--config", path, "restore", backup)
	if res.code != 1 || !strings.Contains(res.stderr, "restore refused") || !strings.Contains(res.stderr, fmt.Sprintf("PID %d", gw.cmd.Process.Pid)) {
		t.Fatalf("restore beside a running gateway: exit %d %q; want a refusal naming its PID", res.code, res.stderr)
	}

	gw.closeInput()
	if code := gw.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("gateway exit %d; stderr:\n%s", code, gw.stderr.String())
	}
	if all := messageTexts(t, filepath.Join(dir, store.FileName)); !all["during 14"] {
		t.Fatal("the live database lacks the last message")
	}
	res = runMain(t, nil, "", "--config", path, "restore", backup)
	if res.code != 0 || !strings.Contains(res.stdout, "the previous database is kept as") {
		t.Fatalf("restore: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	restored := messageTexts(t, filepath.Join(dir, store.FileName))
	if !restored["before 19"] || len(restored) != len(got) {
		t.Fatalf("restored database has %d answered messages, the backup %d", len(restored), len(got))
	}
	aside, _ := filepath.Glob(filepath.Join(dir, store.FileName+".before-restore-*"))
	if len(aside) == 0 || !messageTexts(t, aside[0])["during 14"] {
		t.Fatalf("the previous database was not kept aside: %v", aside)
	}
	if res := runMain(t, nil, "", "--config", path, "restore", path); res.code != 1 || !strings.Contains(res.stderr, "not a usable OpenTalon database") {
		t.Errorf("restoring a file that is no database: exit %d %q", res.code, res.stderr)
	}
}

func TestE2EHealthcheck(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	y := strings.Replace(testConfig(t.TempDir(), llm.BaseURL(), ""), `listen: ""`, fmt.Sprintf(`listen: "0.0.0.0:%d"`, port), 1)
	// Bind loopback only, but name the wildcard in the config the
	// healthcheck reads: it asks 127.0.0.1.
	path := writeConfig(t, y)
	cfg := loadConfigFile(t, path)
	cfg.Server.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	h := startApp(t, cfg)
	waitAddr(t, h.app)
	if res := runMain(t, nil, "", "--config", path, "healthcheck"); res.code != 0 || !strings.Contains(res.stdout, "healthy") {
		t.Fatalf("healthcheck of a running gateway: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	h.shutdown()
	if res := runMain(t, nil, "", "--config", path, "healthcheck"); res.code != 1 || !strings.Contains(res.stderr, "/healthz") {
		t.Fatalf("healthcheck after the stop: exit %d %q", res.code, res.stderr)
	}
}
