package main

// The deployment files as an operator uses them (issue 26): the systemd
// unit checked by systemd-analyze and run with its own environment and
// the README's snippet as the config; the Dockerfile's image laid out in a
// directory and run there (e2e_docker_test.go).

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core/testenv"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

const unitFile = "../../deploy/opentalon.service"

// unit is the [Service] section of deploy/opentalon.service: each key's
// values in order.
type unit map[string][]string

func readUnit(t *testing.T) unit {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", unitFile, line)
			}
			u[k] = append(u[k], v)
		}
	}
	return u
}

// env is the environment the unit gives the process: its Environment=
// lines (each VAR=value) after systemd's PATH.
func (u unit) env() map[string]string {
	env := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, e := range u["Environment"] {
		for _, kv := range strings.Fields(e) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

// preventedStatuses are the exit statuses RestartPreventExitStatus lists.
func (u unit) preventedStatuses(t *testing.T) []int {
	var out []int
	for _, v := range u["RestartPreventExitStatus"] {
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("RestartPreventExitStatus %q: %v", v, err)
			}
			out = append(out, n)
		}
	}
	return out
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit, with
// ExecStart's binary pointed at an executable that exists here; any
// complaint about the unit fails.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := testenv.LookPath(t, "systemd-analyze", "systemd")
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	u := readUnit(t)
	exec0 := strings.Fields(u["ExecStart"][0])[0]
	if exec0 != "/usr/local/bin/opentalon" {
		t.Fatalf("ExecStart runs %s; the README installs the binary as /usr/local/bin/opentalon", exec0)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "opentalon.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), exec0, self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	var complaints []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "opentalon.service") {
			complaints = append(complaints, l)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}

// readmeSnippet returns the first ```yaml block of README.md after the
// line that starts with marker.
func readmeSnippet(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+marker)
	if i < 0 {
		t.Fatalf("README.md has no line starting with %q", marker)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(s[i:])
	if m == nil {
		t.Fatalf("README.md has no yaml block after %q", marker)
	}
	return m[1]
}

// setYAML sets key path (dotted) to value in the YAML document y, adding
// the last key when it is missing; everything else stays as written.
func setYAML(t *testing.T, y, path, value string) string {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(y), &doc); err != nil {
		t.Fatal(err)
	}
	n := doc.Content[0]
	keys := strings.Split(path, ".")
	for i, k := range keys {
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			if i < len(keys)-1 {
				t.Fatalf("%s: no %s in\n%s", path, k, y)
			}
			next = &yaml.Node{Kind: yaml.ScalarNode}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, next)
		}
		n = next
	}
	n.Kind, n.Tag, n.Value = yaml.ScalarNode, "!!str", value
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestSystemdUnitEnvironmentWithReadmeSnippet runs the binary the way the
// unit does — its ExecStart arguments, its Environment= lines, secrets as
// EnvironmentFile gives them, HOME unusable (ProtectHome=yes) — with the
// README's Telegram snippet as /etc/opentalon/config.yaml. The snippet
// gains only the fakes' URLs, and the server a free port through
// OPENTALON_LISTEN. The database lands in OPENTALON_DATA_DIR, private; a
// token the platform refuses, and a secret left out of the env file, end
// the process with a status RestartPreventExitStatus lists, saying why.
func TestSystemdUnitEnvironmentWithReadmeSnippet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	u := readUnit(t)
	args := strings.Fields(u["ExecStart"][0])[1:]
	env := u.env()
	root := t.TempDir()
	dataDir := filepath.Join(root, "var/lib/opentalon")
	cfgPath := filepath.Join(root, "etc/opentalon/config.yaml")
	if env["OPENTALON_DATA_DIR"] != "/var/lib/opentalon" || env["OPENTALON_CONFIG"] != "/etc/opentalon/config.yaml" {
		t.Fatalf("the unit's environment %v; want OPENTALON_DATA_DIR=/var/lib/opentalon and OPENTALON_CONFIG=/etc/opentalon/config.yaml", env)
	}
	env["OPENTALON_DATA_DIR"], env["OPENTALON_CONFIG"] = dataDir, cfgPath
	// StateDirectory=opentalon with StateDirectoryMode=0700.
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// User=opentalon has no home (useradd --no-create-home), and
	// ProtectHome=yes hides /home anyway: a path below a file cannot be
	// created, even by root.
	blocker := filepath.Join(root, "home")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env["HOME"] = filepath.Join(blocker, "opentalon")
	env["OPENTALON_LISTEN"] = "127.0.0.1:0"

	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	y := readmeSnippet(t, "A Telegram bot, for example:")
	y = setYAML(t, y, "models.providers.openai.base_url", llm.BaseURL())
	y = setYAML(t, y, "channels.telegram.api_url", bot.URL)
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	// /etc/opentalon/env.
	env["OPENAI_API_KEY"] = "sk-from-the-env-file"
	env["TELEGRAM_BOT_TOKEN"] = tgToken
	list := func(env map[string]string) []string {
		var out []string
		for k, v := range env {
			out = append(out, k+"="+v)
		}
		return out
	}

	p := startBinaryEnv(t, list(env), args...)
	alice := telegramtest.User(42, "alice")
	bot.AddUpdate(bot.Private(alice, "hello from systemd"))
	deadline := time.Now().Add(30 * time.Second)
	for len(bot.Sent()) == 0 {
		select {
		case <-p.done:
			t.Fatalf("the gateway exited before answering; stderr:\n%s", p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer within 30s; stderr:\n%s", p.stderr.String())
		}
	}
	sent := bot.Sent()
	if !strings.Contains(sent[0].Text, "hello from systemd") {
		t.Fatalf("reply %q; want the fake LLM's echo", sent[0].Text)
	}
	if r, _ := llm.Last(); r.APIKey != "sk-from-the-env-file" {
		t.Errorf("the LLM saw key %q; want the env file's", r.APIKey)
	}
	fi, err := os.Stat(filepath.Join(dataDir, "opentalon.db"))
	if err != nil {
		t.Fatalf("no database in OPENTALON_DATA_DIR: %v; stderr:\n%s", err, p.stderr.String())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode %04o; want 0600", fi.Mode().Perm())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(60 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d; stderr:\n%s", code, p.stderr.String())
	}

	prevented := u.preventedStatuses(t)
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"refused token", func(e map[string]string) { e["TELEGRAM_BOT_TOKEN"] = "999:refused" }, "channels.telegram"},
		{"secret missing from the env file", func(e map[string]string) { delete(e, "TELEGRAM_BOT_TOKEN") }, "TELEGRAM_BOT_TOKEN is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			tc.edit(e)
			p := startBinaryEnv(t, list(e), args...)
			code := p.exitCode(60 * time.Second)
			stderr := p.stderr.String()
			if !slices.Contains(prevented, code) || code == 0 {
				t.Fatalf("exit %d; want a status RestartPreventExitStatus lists (%v), so systemd does not restart every 5 s; stderr:\n%s", code, prevented, stderr)
			}
			for _, want := range []string{tc.want, "exit status " + strconv.Itoa(code), "RestartPreventExitStatus"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
	if _, err := os.Stat(env["HOME"]); err == nil {
		t.Errorf("something was created in HOME %s", env["HOME"])
	}
}
