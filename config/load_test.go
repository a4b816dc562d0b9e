package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// TestLoadErrors: each bad config yields the listed messages, each with
// the file name and line where it applies.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		env  map[string]string
		want []string // one substring set per expected problem, in order
	}{
		{
			name: "unknown key with suggestion",
			body: minimal + "queue:\n  wrokers: 3\n",
			want: []string{`config.yaml:10: unknown key "wrokers" in queue (did you mean "workers"?)`},
		},
		{
			name: "unknown nested key in a map entry",
			body: minimal + "  pin: { code: fake/x }\nchannels:\n  telegram: { enabeld: true }\n",
			want: []string{`config.yaml:11: unknown key "enabeld" in channels.telegram (did you mean "enabled"?)`},
		},
		{
			name: "unknown top-level key lists valid keys",
			body: minimal + "zzz: 1\n",
			want: []string{`config.yaml:9: unknown key "zzz" at the top level; valid keys: state, queue, models`},
		},
		{
			name: "unknown top-level key close to a section",
			body: minimal + "channles: {}\n",
			want: []string{`config.yaml:9: unknown key "channles" at the top level (did you mean "channels"?)`},
		},
		{
			name: "unset variable names it and its line",
			body: minimal + "server:\n  api_key: ${MY_SECRET_KEY}\n",
			want: []string{`config.yaml:10: server.api_key: environment variable MY_SECRET_KEY is not set`},
		},
		{
			name: "unset variable in an enabled channel",
			body: minimal + "channels:\n  telegram:\n    enabled: true\n    token: ${TG_TOKEN}\n",
			// One problem: the variable to set (not also "missing").
			want: []string{
				`config.yaml:12: channels.telegram.token: environment variable TG_TOKEN is not set`,
			},
		},
		{
			name: "bad weight names the key path",
			body: strings.Replace(minimal, "weight: 10", "weight: 150", 1),
			want: []string{`config.yaml:5: models.catalog.fake/big.weight: must be 0..100 (got 150)`},
		},
		{
			name: "unknown model reference with close match",
			body: minimal + "  fallbacks: [fake/big, bgi]\n",
			want: []string{`config.yaml:9: routing.fallbacks[1]: unknown model "bgi" (did you mean "big"?) && (configured: fake)`},
		},
		{
			name: "unknown provider prefix in pin",
			body: minimal + "  pin: { code: nope/model }\n",
			want: []string{`routing.pin.code: unknown model "nope/model"`},
		},
		{
			name: "unknown model in telegram per-chat models",
			body: minimal + "channels:\n  telegram:\n    enabled: true\n    token: t\n    models: { \"-100\": huge }\n",
			want: []string{`config.yaml:13: channels.telegram.models.-100: unknown model "huge"`},
		},
		{
			name: "unknown lua default model",
			body: minimal + "plugins:\n  lua: { default_model: tiny }\n",
			want: []string{`plugins.lua.default_model: unknown model "tiny"`},
		},
		{
			name: "bad api suggests the fix",
			body: "models:\n  providers:\n    p: { api: openai-completion }\nrouting: { primary: p/m }\n",
			want: []string{`config.yaml:3: models.providers.p.api: unknown api "openai-completion" (did you mean "openai-completions"?)`},
		},
		{
			name: "bad base_url",
			body: "models:\n  providers:\n    p: { api: openai-completions, base_url: \"localhost:11434\" }\nrouting: { primary: p/m }\n",
			want: []string{`models.providers.p.base_url: "localhost:11434" is not an http(s) URL`},
		},
		{
			name: "catalog provider missing",
			body: strings.Replace(minimal, "fake/small:", "other/small:", 1),
			want: []string{`config.yaml:6: models.catalog.other/small: provider "other" is not in models.providers && add models.providers.other`},
		},
		{
			name: "duplicate alias",
			body: strings.Replace(minimal, "alias: small", "alias: big", 1),
			want: []string{`config.yaml:6: models.catalog.fake/small.alias: alias "big" is already used by models.catalog.fake/big`},
		},
		{
			name: "workers below one",
			body: minimal + "queue: { workers: 0 }\n",
			want: []string{`config.yaml:9: queue.workers: must be at least 1 (got 0)`},
		},
		{
			name: "type error with line and key path",
			body: minimal + "queue:\n  workers: many\n",
			want: []string{`config.yaml:10: queue.workers: "many" is not a whole number: write one such as 4`},
		},
		{
			name: "bad duration",
			body: minimal + "queue:\n  request_timeout: 30\n",
			want: []string{`config.yaml:10: queue.request_timeout: "30" is not a duration; write e.g. "30s"`},
		},
		{
			name: "telegram webhook needs url, listen and secret",
			body: minimal + "channels:\n  telegram: { enabled: true, token: t, mode: webhook }\n",
			want: []string{"channels.telegram.webhook.url: missing", "channels.telegram.webhook.listen: missing", "channels.telegram.webhook.secret: missing"},
		},
		{
			name: "telegram mode and trigger",
			body: minimal + "channels:\n  telegram: { enabled: true, token: t, mode: pollin, group_trigger: some }\n",
			want: []string{`channels.telegram.group_trigger: unknown value "some"`, `channels.telegram.mode: unknown mode "pollin" (did you mean "polling"?)`},
		},
		{
			name: "telegram messages_per_second negative",
			body: minimal + "channels:\n  telegram: { enabled: true, token: t, messages_per_second: -1 }\n",
			want: []string{`channels.telegram.messages_per_second: -1 is negative; use 0 for Telegram's limit of 30 a second`},
		},
		{
			name: "slack names its missing tokens",
			body: minimal + "channels:\n  slack: { enabled: true }\n",
			want: []string{"channels.slack.bot_token: missing && xoxb-", "channels.slack.app_token: missing; mode socket needs an app-level token (xapp-"},
		},
		{
			name: "no provider",
			body: "queue: { workers: 2 }\n",
			want: []string{"config.yaml: models.providers: no LLM provider configured && ANTHROPIC_API_KEY"},
		},
		{
			name: "bad sanitize pattern",
			body: minimal + "plugins:\n  tools:\n    sanitize: { extra_patterns: [\"(\"] }\n",
			want: []string{"plugins.tools.sanitize.extra_patterns[0]: not a valid Go regular expression"},
		},
		{
			name: "plugin isolation limits",
			body: minimal + "plugins:\n  tools:\n    max_calls_per_turn: 0\n    state: { max_keys: -1, max_bytes: -5, writes_per_second: -1 }\n    process_limits: { address_space_mb: 100, open_files: -1 }\n",
			want: []string{"plugins.tools.max_calls_per_turn: must be at least 1", "plugins.tools.state.max_keys: must be at least 0",
				"plugins.tools.state.max_bytes: must not be negative", "plugins.tools.state.writes_per_second: must not be negative",
				"plugins.tools.process_limits.open_files: must be at least 0", "plugins.tools.process_limits.address_space_mb: 100 MB is too little"},
		},
		{
			name: "yaml syntax error",
			body: "queue:\n  workers: [1\n",
			want: []string{"config.yaml:2: a [ ] or { } on this line is not closed"},
		},
		{
			name: "duplicated section stops before validation",
			body: minimal + "routing: {}\n",
			want: []string{`config.yaml:9: routing: duplicate key (first given at line 7); merge the two into one`},
		},
		{
			name: "all problems are collected",
			body: minimal + "queue: { wrokers: 1, workers: 0 }\nserver: { api_key: \"${NOPE}\" }\n",
			want: []string{`unknown key "wrokers"`, "queue.workers: must be at least 1", "environment variable NOPE is not set"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HOME": "/home/tester"}
			for k, v := range tt.env {
				env[k] = v
			}
			_, err := Load(writeConfig(t, tt.body), MapEnv(env))
			ps := problemsOf(t, err)
			if core.ErrorKind(err) != core.KindInvalid {
				t.Errorf("kind = %v, want invalid", core.ErrorKind(err))
			}
			if len(ps) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			for i, w := range tt.want {
				if i < len(ps) {
					mustContain(t, ps[i].String(), strings.Split(w, " && ")...)
				}
			}
		})
	}
}

func TestDisabledSectionNeedsNoVariables(t *testing.T) {
	body := minimal + `channels:
  telegram:
    enabled: false
    token: ${TELEGRAM_BOT_TOKEN}
  slack:
    bot_token: ${SLACK_BOT_TOKEN}
  discord:
    enabled: ${DISCORD_ON:-false}
    token: ${DISCORD_BOT_TOKEN}
`
	cfg, err := Load(writeConfig(t, body), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Channels.Telegram.Token.IsSet() || cfg.Channels.Telegram.Enabled {
		t.Errorf("telegram = %+v, want disabled without token", cfg.Channels.Telegram)
	}
	// Enabling it through the variable makes the token required.
	_, err = Load(writeConfig(t, body), MapEnv(map[string]string{"DISCORD_ON": "true"}))
	ps := problemsOf(t, err)
	mustContain(t, fmt.Sprint(ps), "channels.discord.token: environment variable DISCORD_BOT_TOKEN is not set")
	if len(ps) != 1 {
		t.Errorf("problems %v; want the unset variable only", ps)
	}
}

func TestSubstitution(t *testing.T) {
	body := `state:
  data_dir: "${DATA:-./state}"
queue:
  workers: ${WORKERS:-2}
  request_timeout: "${TIMEOUT:-90s}"
models:
  providers:
    fake:
      api: openai-completions
      base_url: ${BASE}
      api_key: "${KEY}"
      headers: { X-Price: "$$5" }
routing: { primary: "fake/${MODEL:-m1}" }
orchestrator:
  rules: ["costs $$${PRICE:-3}", !!str "${WORKERS:-7}"]
`
	env := MapEnv(map[string]string{"HOME": "/home/tester", "BASE": "http://127.0.0.1:1/v1", "KEY": "s3cret", "MODEL": "m2", "WORKERS": ""})
	path := writeConfig(t, body)
	cfg, err := Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Models.Providers["fake"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir relative to config dir", cfg.State.DataDir, filepath.Join(filepath.Dir(path), "state")},
		{"workers from default", cfg.Queue.Workers, 2},
		{"timeout", cfg.Queue.RequestTimeout.D(), 90 * time.Second},
		{"base_url", p.BaseURL, "http://127.0.0.1:1/v1"},
		{"api_key", p.APIKey.Value(), "s3cret"},
		{"$$ escape", p.Headers["X-Price"].Value(), "$5"},
		{"primary", cfg.Routing.Primary, "fake/m2"},
		{"rule", cfg.Orchestrator.Rules[0], "costs $3"},
		{"explicit tag keeps string", cfg.Orchestrator.Rules[1], "7"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestDefaultsAndPaths(t *testing.T) {
	body := minimal + `auth: { profiles_file: ~/profiles.json }
plugins:
  tools: { plugin_dir: plugins, plugins: [/opt/p1, ./p2], overrides: { slow: { timeout: 90s } } }
  lua: { scripts_dir: ~/scripts }
`
	path := writeConfig(t, body)
	cfg, err := Load(path, noEnv())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	def := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir", cfg.State.DataDir, "/home/tester/.opentalon"},
		{"db", cfg.DBPath(), "/home/tester/.opentalon/opentalon.db"},
		{"profiles", cfg.Auth.ProfilesFile, "/home/tester/profiles.json"},
		{"plugin_dir", cfg.Plugins.Tools.PluginDir, filepath.Join(dir, "plugins")},
		{"plugin abs", cfg.Plugins.Tools.Plugins[0], "/opt/p1"},
		{"plugin rel", cfg.Plugins.Tools.Plugins[1], filepath.Join(dir, "p2")},
		{"scripts", cfg.Plugins.Lua.ScriptsDir, "/home/tester/scripts"},
		{"workers", cfg.Queue.Workers, 4},
		{"console on", cfg.Channels.Console.Enabled, true},
		{"affinity on", cfg.Routing.Affinity.Enabled, true},
		{"listen", cfg.Server.Listen, "127.0.0.1:7070"},
		{"telegram api", cfg.Channels.Telegram.APIURL, def.Channels.Telegram.APIURL},
		{"override timeout", cfg.Plugins.Tools.LimitsFor("slow").Timeout.D(), 90 * time.Second},
		{"override inherits size", cfg.Plugins.Tools.LimitsFor("slow").MaxResponseBytes, 65536},
		{"no override", cfg.Plugins.Tools.LimitsFor("other").Timeout.D(), 30 * time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestExplicitFalseAndEmptyFile(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal+"  affinity: { enabled: false }\nchannels: { console: { enabled: false } }\n"), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Channels.Console.Enabled || cfg.Routing.Affinity.Enabled {
		t.Errorf("enabled: false was not applied: console %v affinity %v", cfg.Channels.Console.Enabled, cfg.Routing.Affinity.Enabled)
	}
	// An empty file is all defaults plus the provider from the environment.
	cfg, err = Load(writeConfig(t, "# nothing\n"), MapEnv(map[string]string{"OPENAI_API_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Routing.Primary != "openai/"+DefaultOpenAIModel {
		t.Errorf("primary = %q", cfg.Routing.Primary)
	}
}

func TestResolveModel(t *testing.T) {
	cfg, err := Load(writeConfig(t, minimal), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref, want string
		ok        bool
	}{
		{"fake/big", "fake/big", true},
		{"big", "fake/big", true},
		{"fake/unlisted", "fake/unlisted", true},
		{"huge", "", false},
		{"other/big", "", false},
		{"fake/", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := cfg.ResolveModel(tt.ref)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ResolveModel(%q) = %q, %v; want %q, %v", tt.ref, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), noEnv())
	if core.ErrorKind(err) != core.KindNotFound {
		t.Fatalf("err = %v, want not found", err)
	}
	mustContain(t, err.Error(), "nope.yaml does not exist", "--config")
	var e *Errors
	if errors.As(err, &e) {
		t.Error("a missing file is not a list of problems")
	}
	if !strings.Contains(err.Error(), "examples/config.yaml") {
		t.Error("error should point at the example")
	}
}

// TestPostgresSectionNeedsNoVariablesOnSQLite: state.postgres is switched
// off by state.driver sqlite (the default), as a section by enabled:
// false; a DSN from a variable not set is required with driver postgres
// only.
func TestPostgresSectionNeedsNoVariablesOnSQLite(t *testing.T) {
	for _, driver := range []string{"", "  driver: sqlite\n", "  driver: ${OPENTALON_STATE_DRIVER:-}\n"} {
		body := minimal + "state:\n  postgres:\n    dsn: \"${OPENTALON_POSTGRES_DSN}\"\n" + driver
		cfg, err := Load(writeConfig(t, body), noEnv())
		if err != nil {
			t.Fatalf("driver %q: %v", driver, err)
		}
		if cfg.State.Driver != DriverSQLite || cfg.State.Postgres.DSN.IsSet() {
			t.Errorf("driver %q: state = %q, dsn set %v; want sqlite without a DSN", driver, cfg.State.Driver, cfg.State.Postgres.DSN.IsSet())
		}
	}
	for _, driver := range []string{"  driver: postgres\n", "  driver: ${OPENTALON_STATE_DRIVER}\n"} {
		body := minimal + "state:\n  postgres:\n    dsn: \"${OPENTALON_POSTGRES_DSN}\"\n" + driver
		_, err := Load(writeConfig(t, body), MapEnv(map[string]string{"HOME": "/home/tester", "OPENTALON_STATE_DRIVER": "postgres"}))
		ps := problemsOf(t, err)
		mustContain(t, fmt.Sprint(ps), "state.postgres.dsn: environment variable OPENTALON_POSTGRES_DSN is not set")
	}
}
