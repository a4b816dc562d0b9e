package main

// The commands that work on the database need only what they use (issue
// 26, item 7): with no config file and no provider variable they work on
// ~/.opentalon, and a wrong command line is reported as such.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
	"github.com/opentalon/opentalon/store"
)

func TestDatabaseCommandsNeedNoProvider(t *testing.T) {
	home := t.TempDir()
	db, err := store.Open(context.Background(), filepath.Join(home, ".opentalon"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	script := filepath.Join(t.TempDir(), "shout.lua")
	os.WriteFile(script, []byte("function pre_hook(ctx)\n  ctx.message = string.upper(ctx.message)\n  return ctx\nend\n"), 0o644)
	// healthcheck asks server.listen's /healthz: a stand-in answers.
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Write([]byte("ok\n"))
			return
		}
		http.NotFound(w, r)
	}))
	defer gw.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(gw.URL, "http://"))
	env := map[string]string{"HOME": home, "OPENTALON_LISTEN": "127.0.0.1:" + port}
	backup := filepath.Join(t.TempDir(), "backup.db")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage"}, "TOTAL (last 24h)"},
		{[]string{"usage", "--json", "--by", "chat"}, `"by": "chat"`},
		{[]string{"affinity", "show"}, "No affinity yet"},
		{[]string{"affinity", "reset"}, "Reset 0 affinity rows."},
		{[]string{"pair", "list"}, "No pairing requests yet"},
		{[]string{"plugins", "list"}, "no plugin has registered yet"},
		{[]string{"memory", "list"}, ""},
		{[]string{"queue"}, "queue: 0 queued, 0 running"},
		{[]string{"backup", backup}, "backed up"},
		{[]string{"restore", backup}, "restored"},
		{[]string{"healthcheck"}, "healthy"},
		{[]string{"lua", "test", script, "--message", "hi"}, `"message": "HI"`},
	} {
		res := runMain(t, env, "", tc.args...)
		if res.code != 0 || !strings.Contains(res.stdout, tc.want) {
			t.Errorf("%v with no provider: exit %d, stdout %q, stderr %s", tc.args, res.code, res.stdout, res.stderr)
		}
		if strings.Contains(res.stderr, "no LLM provider") {
			t.Errorf("%v asked for an LLM provider:\n%s", tc.args, res.stderr)
		}
	}

	// A wrong command line is reported as one, before the config.
	noHome := map[string]string{"HOME": filepath.Join(home, "nowhere")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "--nope"}, "usage: opentalon usage"},
		{[]string{"affinity", "show", "--x"}, "affinity show: flag provided but not defined: -x"},
		{[]string{"affinity", "frobnicate"}, "unknown subcommand"},
		{[]string{"pair", "approve"}, "usage: opentalon pair"},
		{[]string{"plugins", "unbind"}, "usage: opentalon plugins"},
		{[]string{"backup"}, "usage: opentalon backup FILE"},
		{[]string{"queue", "--nope"}, "usage: opentalon queue [--json]"},
		{[]string{"queue", "show", "x"}, "is not a queue item id"},
	} {
		res := runMain(t, noHome, "", tc.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
	// What needs a model still says what to set.
	if res := runMain(t, env, "", "complete", "hi"); res.code == 0 || !strings.Contains(res.stderr, "OPENAI_BASE_URL") {
		t.Errorf("complete with no provider: exit %d, stderr %s", res.code, res.stderr)
	}
	if res := runMain(t, env, "", "lua", "test", script, "--message", "hi", "--hook", "pre_hook"); res.code != 0 {
		t.Errorf("lua test with --hook: exit %d %s", res.code, res.stderr)
	}

	// A command reads only its own keys: a mistake in models.catalog
	// (which affinity reads for its aliases) stops affinity, not usage
	// or pair.
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("state:\n  data_dir: "+filepath.Join(home, ".opentalon")+"\nmodels:\n  catalog:\n    no-slash: {}\n"), 0o600)
	for _, args := range [][]string{{"usage"}, {"pair", "list"}} {
		if res := runMain(t, env, "", append([]string{"--config", cfg}, args...)...); res.code != 0 {
			t.Errorf("%v with a bad models.catalog: exit %d, stderr %s", args, res.code, res.stderr)
		}
	}
	if res := runMain(t, env, "", "--config", cfg, "affinity", "show"); res.code == 0 || !strings.Contains(res.stderr, "models.catalog.no-slash") {
		t.Errorf("affinity show with a bad models.catalog: exit %d, stderr %s; want the catalog's problem", res.code, res.stderr)
	}
}

// complete needs only what it uses (issue 26, item 7): the README's
// Telegram config answers a prompt without the bot token's variable, and
// with no file and no provider variable it says what to export.
func TestCompleteNeedsNoChannelSecrets(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(providertest.Received) providertest.Script { return providertest.Script{Text: "answer"} })
	path := writeConfig(t, fmt.Sprintf(`state: { data_dir: %q }
models:
  providers:
    openai: { api: openai-completions, api_key: "${OPENAI_API_KEY}", base_url: %q }
  catalog:
    openai/gpt-4o-mini: { alias: mini, weight: 90 }
routing: { primary: openai/gpt-4o-mini }
channels:
  console:  { enabled: false }
  telegram: { enabled: true, token: "${TELEGRAM_BOT_TOKEN}" }
`, t.TempDir(), llm.BaseURL()))
	res := runMain(t, map[string]string{"OPENAI_API_KEY": "sk-test"}, "", "--config", path, "complete", "say hi")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "answer" {
		t.Fatalf("complete without TELEGRAM_BOT_TOKEN: exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	// What it uses is still checked.
	res = runMain(t, nil, "", "--config", path, "complete", "say hi")
	if res.code == 0 || !strings.Contains(res.stderr, "OPENAI_API_KEY is not set") || strings.Contains(res.stderr, "TELEGRAM_BOT_TOKEN") {
		t.Fatalf("complete without OPENAI_API_KEY: exit %d, stderr %s", res.code, res.stderr)
	}
	res = runMain(t, map[string]string{"HOME": t.TempDir()}, "", "complete", "say hi")
	if res.code == 0 || !strings.Contains(res.stderr, "no LLM provider configured and no config file found") || !strings.Contains(res.stderr, "export OPENAI_BASE_URL=") {
		t.Fatalf("complete with no provider: exit %d, stderr %s", res.code, res.stderr)
	}
}
