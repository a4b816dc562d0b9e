package main

// `config check` and `run` agree (issue 26, item 6): on each config of a
// table, config check refuses exactly what run refuses, with the same
// message, and prints every warning run logs at start.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// runUntilServing runs `opentalon run` in-process with JSON logs until it
// logs that it is running (then stops it) or exits; it returns the exit
// code, the error line Main printed, and the messages of the warnings
// and errors logged before it ran.
func runUntilServing(t *testing.T, cfgPath string) (code int, errLine string, warnings []string) {
	t.Helper()
	errb := &lockedBuf{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--config", cfgPath, "--log-format", "json", "run"},
			Stdio{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: errb}, func(string) (string, bool) { return "", false })
	}()
	running := false
	for {
		select {
		case code = <-done:
		case <-time.After(10 * time.Millisecond):
			if !running && strings.Contains(errb.String(), `"msg":"opentalon running"`) {
				running = true
				cancel()
			}
			continue
		}
		break
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		var rec struct {
			Level, Msg string
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			if rec.Msg == "opentalon running" {
				break
			}
			if rec.Level == "WARN" || rec.Level == "ERROR" {
				warnings = append(warnings, rec.Msg)
			}
			continue
		}
		if s, ok := strings.CutPrefix(line, "opentalon: "); ok && errLine == "" {
			errLine = s
		}
	}
	if running {
		code = 0 // stopped by the test once it served
	}
	return code, errLine, warnings
}

func TestConfigCheckAgreesWithRun(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	tg := fmt.Sprintf("  telegram: { enabled: true, token: %q, api_url: %q", tgToken, bot.URL)
	openDir := t.TempDir()
	os.Chmod(openDir, 0o777)
	luaDir := t.TempDir()
	os.WriteFile(filepath.Join(luaDir, "10-broken.lua"), []byte("function pre_hook(ctx\n"), 0o644)
	aFile := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(aFile, nil, 0o600)
	tests := []struct {
		name, extra string
		refused     string // a part of the error both print; "" = both accept
		warns       []string
		dataDir     string // "" = a fresh temporary one
	}{
		{"a data_dir under a file", "", "state.data_dir: " + aFile + " is a file, not a directory", nil, filepath.Join(aFile, "data")},
		{"a Lua scripts_dir that does not exist", "plugins:\n  lua: { scripts_dir: " + filepath.Join(t.TempDir(), "no-lua") + " }\n", "", []string{"plugins.lua.scripts_dir does not exist; opentalon run creates it"}, ""},
		{"console only", "", "", nil, ""},
		{"no channel enabled", "channels:\n  console: { enabled: false }\n", "no channel is enabled", nil, ""},
		{"listen beyond loopback without api_key", "listen: 0.0.0.0:0", "", []string{"server.listen is reachable beyond this machine"}, ""},
		{"a public bot open to everyone", "channels:\n  console: { enabled: false }\n" + tg + " }\n", "", []string{"channels.telegram is open to everyone"}, ""},
		{"pairing without admins", "channels:\n  console: { enabled: false }\n" + tg + ", access: pairing }\n", "", []string{"channels.telegram pairs users but has no admins"}, ""},
		{"seed 004's affinity store file", "routing:\n  affinity: { enabled: true, store: ~/.opentalon/affinity.json, decay_days: 30 }\n", "", []string{"routing.affinity.store is ignored"}, ""},
		{"an allowlisted bot", "channels:\n  console: { enabled: false }\n" + tg + ", allow_users: [\"42\"] }\n", "", nil, ""},
		{"a short webhook secret", "channels:\n  console: { enabled: false }\n" + tg + ", allow_users: [\"42\"], mode: webhook, webhook: { url: \"https://bot.example.com/tg\", listen: \"127.0.0.1:0\", secret: abc } }\n", "", []string{"channels.telegram.webhook.secret has 3 characters"}, ""},
		{"a long webhook secret", "channels:\n  console: { enabled: false }\n" + tg + ", allow_users: [\"42\"], mode: webhook, webhook: { url: \"https://bot.example.com/tg\", listen: \"127.0.0.1:0\", secret: 0123456789abcdef } }\n", "", nil, ""},
		{"an orchestration step that does not compile", "orchestrator:\n  steps:\n    - { name: s, when: \"(\", tools: [x.y] }\n", "orchestrator.steps[0].when", nil, ""},
		{"a plugin_dir that cannot be created", "plugins:\n  tools: { plugin_dir: " + filepath.Join(aFile, "plugins") + " }\n", "plugins.tools.plugin_dir " + filepath.Join(aFile, "plugins"), nil, ""},
		{"a plugin_dir that does not exist", "plugins:\n  tools: { plugin_dir: " + filepath.Join(t.TempDir(), "missing") + " }\n", "", []string{"plugins.tools.plugin_dir does not exist; opentalon run creates it"}, ""},
		{"a plugin_dir others may write", "plugins:\n  tools: { plugin_dir: " + openDir + " }\n", "plugins.tools.plugin_dir", nil, ""},
		{"a Lua script that does not compile", "plugins:\n  lua: { scripts_dir: " + luaDir + " }\n", "10-broken.lua", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := tt.dataDir
			if dataDir == "" {
				dataDir = t.TempDir()
			}
			y := testConfig(dataDir, llm.BaseURL(), tt.extra)
			if keys, ok := strings.CutPrefix(tt.extra, "routing:\n"); ok {
				y = testConfig(dataDir, llm.BaseURL(), "")
				y = strings.Replace(y, "routing:\n", "routing:\n"+keys, 1)
			}
			if listen, ok := strings.CutPrefix(tt.extra, "listen: "); ok {
				y = strings.Replace(testConfig(t.TempDir(), llm.BaseURL(), ""), `listen: ""`, "listen: "+listen, 1)
			}
			path := writeConfig(t, y)
			check := runMain(t, nil, "", "--config", path, "config", "check")
			code, errLine, runWarns := runUntilServing(t, path)

			if (check.code == 0) != (code == 0) {
				t.Fatalf("config check exit %d, run exit %d; they must agree\nconfig check stderr:\n%s\nrun: %s", check.code, code, check.stderr, errLine)
			}
			if tt.refused != "" {
				// A config only the operator can fix: the status the
				// systemd unit does not restart on.
				if code != exitConfig || !strings.Contains(errLine, tt.refused) {
					t.Fatalf("run: exit %d %q; want exit %d, a refusal naming %q", code, errLine, exitConfig, tt.refused)
				}
				if !strings.Contains(check.stderr, "opentalon: "+errLine) {
					t.Errorf("config check does not print run's error %q:\n%s", errLine, check.stderr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("run refused: %s", errLine)
			}
			var checkWarns []string
			for _, l := range strings.Split(check.stderr, "\n") {
				if w, ok := strings.CutPrefix(l, "warning: "); ok {
					checkWarns = append(checkWarns, w)
				}
			}
			// Every warning of run is one of config check's (whose lines
			// add the attributes), and as many.
			for _, w := range runWarns {
				if !slices.ContainsFunc(checkWarns, func(c string) bool { return strings.HasPrefix(c, w) }) {
					t.Errorf("run warned %q; config check did not:\n%s", w, check.stderr)
				}
			}
			if len(runWarns) != len(checkWarns) {
				t.Errorf("run logged %d warnings %q; config check printed %d %q", len(runWarns), runWarns, len(checkWarns), checkWarns)
			}
			for _, w := range tt.warns {
				if !slices.ContainsFunc(runWarns, func(r string) bool { return strings.HasPrefix(r, w) }) {
					t.Errorf("run did not warn %q: %q", w, runWarns)
				}
			}
			if len(checkWarns) > 0 && !strings.Contains(check.stdout, fmt.Sprintf("OK, with %d warning(s)", len(checkWarns))) {
				t.Errorf("config check's header does not count the warnings:\n%s", check.stdout)
			}
		})
	}
}

// A database a newer release wrote is the operator's to fix (deploy that
// release, or point the config elsewhere): run refuses it with the status
// a service manager does not restart on.
func TestRunOnADatabaseOfANewerRelease(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "opentalon.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		INSERT INTO schema_migrations VALUES (9999, 'from the future', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, errLine, _ := runUntilServing(t, writeConfig(t, testConfig(dir, llm.BaseURL(), "")))
	if code != exitConfig || !strings.Contains(errLine, "schema version 9999") || !strings.Contains(errLine, "upgrade opentalon") {
		t.Fatalf("run on a newer database: exit %d %q; want exit %d naming the schema version and the fix", code, errLine, exitConfig)
	}
	// doctor says it once, with that fix: not followed by a second,
	// generic "restore a backup with: ...".
	doc := runMain(t, nil, "", "--config", writeConfig(t, testConfig(dir, llm.BaseURL(), "")), "doctor", "--offline")
	if doc.code != 1 || strings.Count(doc.stdout, "restore a backup") != 1 || !strings.Contains(doc.stdout, "FAIL  database: ") {
		t.Fatalf("doctor on a newer database: exit %d\n%s%s; want one FAIL naming the fix once", doc.code, doc.stdout, doc.stderr)
	}
}

// config check with a TMPDIR that names no directory, on a data
// directory run has not made yet: it finds a scratch directory for its
// throwaway database elsewhere (/tmp), as run starts there.
func TestConfigCheckWithATMPDIRThatDoesNotExist(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	dataDir := filepath.Join(t.TempDir(), "not-yet")
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	path := writeConfig(t, testConfig(dataDir, llm.BaseURL(), ""))
	check := runMain(t, nil, "", "--config", path, "config", "check")
	code, errLine, _ := runUntilServing(t, path)
	if check.code != 0 || code != 0 {
		t.Fatalf("config check exit %d, run exit %d %q; want both to accept\nconfig check stderr:\n%s", check.code, code, errLine, check.stderr)
	}
}

// A TMPDIR that names no directory (issue 26, item 2): the plugins'
// sockets go to the data directory, or, when it cannot hold them (plugins
// run as another user, or a path too long for unix sockets), to /tmp.
// config check and run agree, and the plugin starts.
func TestPluginsStartWithATMPDIRThatDoesNotExist(t *testing.T) {
	calc := pluginBinary(t, "../../plugins/examples/calc")
	llm := providertest.NewOpenAI(t)
	// Longer than a unix socket path allows below it.
	dataDir := filepath.Join(t.TempDir(), strings.Repeat("d", 64))
	// Short enough for socket paths: not passed over for its length.
	short, err := os.MkdirTemp("/tmp", "otm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Setenv("TMPDIR", filepath.Join(short, "missing"))
	path := writeConfig(t, testConfig(dataDir, llm.BaseURL(), fmt.Sprintf("plugins:\n  tools: { plugins: [%q] }\n", calc)))
	check := runMain(t, nil, "", "--config", path, "config", "check")
	code, errLine, _ := runUntilServing(t, path)
	if check.code != 0 || code != 0 {
		t.Fatalf("config check exit %d, run exit %d %q; want both to accept\nconfig check stderr:\n%s", check.code, code, errLine, check.stderr)
	}
	res := runMain(t, nil, "", "--config", path, "plugins", "list")
	if res.code != 0 || !strings.Contains(res.stdout, "calc") {
		t.Fatalf("plugins list: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
