package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestLoadDefaultFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		provider string
		api      string
		primary  string
		key      string
		baseURL  string
		local    bool
	}{
		{
			name:     "anthropic",
			env:      map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oa"},
			provider: "anthropic", api: APIAnthropicMessages, primary: "anthropic/" + DefaultAnthropicModel, key: "sk-ant",
		},
		{
			name:     "anthropic with model override",
			env:      map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "OPENTALON_MODEL": "claude-haiku-4-5"},
			provider: "anthropic", api: APIAnthropicMessages, primary: "anthropic/claude-haiku-4-5", key: "sk-ant",
		},
		{
			name:     "openai",
			env:      map[string]string{"OPENAI_API_KEY": "sk-oa", "ANTHROPIC_API_KEY": ""},
			provider: "openai", api: APIOpenAICompletions, primary: "openai/" + DefaultOpenAIModel, key: "sk-oa",
		},
		{
			name:     "openai key with custom base url",
			env:      map[string]string{"OPENAI_API_KEY": "sk-oa", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "OPENTALON_MODEL": "qwen"},
			provider: "openai", api: APIOpenAICompletions, primary: "openai/qwen", key: "sk-oa", baseURL: "http://127.0.0.1:8000/v1", local: true,
		},
		{
			name:     "openai-compatible server without key",
			env:      map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1"},
			provider: "local", api: APIOpenAICompletions, primary: "local/" + DefaultLocalModel, baseURL: "http://localhost:11434/v1", local: true,
		},
		{
			name:     "remote openai-compatible server with model",
			env:      map[string]string{"OPENAI_BASE_URL": "https://llm.example.com/v1", "OPENTALON_MODEL": "mixtral"},
			provider: "local", api: APIOpenAICompletions, primary: "local/mixtral", baseURL: "https://llm.example.com/v1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["HOME"] = "/home/tester"
			cfg, err := LoadDefault(MapEnv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			p, ok := cfg.Models.Providers[tt.provider]
			if !ok || len(cfg.Models.Providers) != 1 {
				t.Fatalf("providers = %v, want only %s", cfg.providerIDs(), tt.provider)
			}
			if p.API != tt.api || p.APIKey.Value() != tt.key || p.BaseURL != tt.baseURL || p.IsLocal() != tt.local {
				t.Errorf("provider = {api %s key set %v base %q local %v}, want {%s %q %q %v}", p.API, p.APIKey.IsSet(), p.BaseURL, p.Local, tt.api, tt.key, tt.baseURL, tt.local)
			}
			if cfg.Routing.Primary != tt.primary {
				t.Errorf("primary = %q, want %q", cfg.Routing.Primary, tt.primary)
			}
			if _, ok := cfg.ResolveModel(cfg.Routing.Primary); !ok {
				t.Error("primary does not resolve")
			}
			if !cfg.Channels.Console.Enabled || cfg.Channels.Telegram.Enabled {
				t.Error("default should run the console only")
			}
			if cfg.DBPath() != "/home/tester/.opentalon/opentalon.db" {
				t.Errorf("db = %q", cfg.DBPath())
			}
		})
	}
}

func TestLoadDefaultDataDirFromEnv(t *testing.T) {
	cfg, err := LoadDefault(MapEnv(map[string]string{"OPENAI_API_KEY": "k", "OPENTALON_DATA_DIR": "/srv/ot"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.DataDir != "/srv/ot" {
		t.Errorf("data_dir = %q, want /srv/ot", cfg.State.DataDir)
	}
	if cfg.Server.Listen != "127.0.0.1:7070" {
		t.Errorf("server.listen without $OPENTALON_LISTEN = %q, want 127.0.0.1:7070", cfg.Server.Listen)
	}
	// The e2e test of the default config listens on a free port this way.
	cfg, err = LoadDefault(MapEnv(map[string]string{"OPENAI_API_KEY": "k", "OPENTALON_LISTEN": "127.0.0.1:0"}))
	if err != nil || cfg.Server.Listen != "127.0.0.1:0" {
		t.Fatalf("server.listen from $OPENTALON_LISTEN = %q, %v; want 127.0.0.1:0", cfg.Server.Listen, err)
	}
}

func TestLoadDefaultWithoutProvider(t *testing.T) {
	_, err := LoadDefault(MapEnv(map[string]string{"HOME": "/h", "ANTHROPIC_API_KEY": ""}))
	if err == nil {
		t.Fatal("expected an error")
	}
	if core.ErrorKind(err) != core.KindInvalid {
		t.Errorf("kind = %v", core.ErrorKind(err))
	}
	mustContain(t, err.Error(), "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENTALON_MODEL",
		"models.providers", "routing.primary", "--config", "examples/config.yaml")
}

func TestResolve(t *testing.T) {
	home := t.TempDir()
	flagFile := writeConfig(t, minimal)
	envFile := writeConfig(t, minimal)
	homeFile := filepath.Join(home, HomeConfig)

	src, err := Resolve("", noEnv(), home)
	if err != nil || src.Kind != SourceDefault {
		t.Fatalf("no file: %v %v, want default", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(homeFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(homeFile, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	env := MapEnv(map[string]string{"OPENTALON_CONFIG": envFile})
	tests := []struct {
		name string
		flag string
		env  Env
		want Source
	}{
		{"flag wins", flagFile, env, Source{SourceFlag, flagFile}},
		{"env next", "", env, Source{SourceEnv, envFile}},
		{"home last", "", noEnv(), Source{SourceHome, homeFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.flag, tt.env, home)
			if err != nil || got != tt.want {
				t.Fatalf("Resolve = %v, %v; want %v", got, err, tt.want)
			}
			if !strings.Contains(got.String(), tt.want.Path) {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
	// An explicitly named file must exist.
	missing := filepath.Join(home, "missing.yaml")
	if _, err := Resolve(missing, noEnv(), home); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("missing flag file: err = %v", err)
	}
	if _, err := Resolve("", MapEnv(map[string]string{"OPENTALON_CONFIG": missing}), home); err == nil || !strings.Contains(err.Error(), "$OPENTALON_CONFIG") {
		t.Errorf("missing env file: err = %v", err)
	}
}

func TestOpen(t *testing.T) {
	home := t.TempDir()
	cfg, src, err := Open("", MapEnv(map[string]string{"HOME": home, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}))
	if err != nil {
		t.Fatal(err)
	}
	if src.Kind != SourceDefault || cfg.Routing.Primary != "local/"+DefaultLocalModel {
		t.Errorf("Open = %v %q", src, cfg.Routing.Primary)
	}
	if cfg.State.DataDir != filepath.Join(home, ".opentalon") {
		t.Errorf("data_dir = %q", cfg.State.DataDir)
	}
	path := writeConfig(t, minimal)
	cfg, src, err = Open(path, noEnv())
	if err != nil || src.Kind != SourceFlag || cfg.Routing.Primary != "fake/small" {
		t.Fatalf("Open(flag) = %v %v %v", src, err, cfg)
	}
}

// A file that leaves state.data_dir, server.listen or server.api_key out
// takes them from OPENTALON_DATA_DIR, OPENTALON_LISTEN and
// OPENTALON_API_KEY (the Docker image and the systemd unit set them); a
// file that gives them keeps its own values.
func TestFileLeavesKeysToTheEnvironment(t *testing.T) {
	env := MapEnv(map[string]string{"HOME": "/home/tester", "OPENTALON_DATA_DIR": "/var/lib/opentalon",
		"OPENTALON_LISTEN": "0.0.0.0:7070", "OPENTALON_API_KEY": "k-from-env"})
	tests := []struct {
		name, body              string
		dataDir, listen, apiKey string
	}{
		{"left out", minimal, "/var/lib/opentalon", "0.0.0.0:7070", "k-from-env"},
		{"given", minimal + "state: { data_dir: ./data }\nserver: { listen: \"127.0.0.1:9000\", api_key: own }\n", "", "127.0.0.1:9000", "own"},
		{"given empty", minimal + "server: { listen: \"\", api_key: \"${UNSET_KEY:-}\" }\n", "/var/lib/opentalon", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.body)
			cfg, err := Load(p, env)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.dataDir
			if want == "" {
				want = filepath.Join(filepath.Dir(p), "data")
			}
			if cfg.State.DataDir != want || cfg.Server.Listen != tt.listen || cfg.Server.APIKey.Value() != tt.apiKey {
				t.Errorf("data_dir %q listen %q api_key %q; want %q %q %q", cfg.State.DataDir, cfg.Server.Listen, cfg.Server.APIKey.Value(), want, tt.listen, tt.apiKey)
			}
		})
	}
	// Without the variables the built-in defaults stay.
	cfg, err := Load(writeConfig(t, minimal), noEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.DataDir != "/home/tester/.opentalon" || cfg.Server.Listen != "127.0.0.1:7070" || cfg.Server.APIKey.IsSet() {
		t.Errorf("without the variables: data_dir %q listen %q api_key set %v", cfg.State.DataDir, cfg.Server.Listen, cfg.Server.APIKey.IsSet())
	}
}

// A command that uses only some keys loads a config whatever is wrong
// elsewhere, but not one whose own keys, or whose YAML, are wrong.
func TestOpenForTheKeysACommandUses(t *testing.T) {
	home := t.TempDir()
	env := MapEnv(map[string]string{"HOME": home})
	// No file, no provider variable: the default, without a provider.
	cfg, src, err := OpenFor("", env, "state")
	if err != nil || src.Kind != SourceDefault || cfg.State.DataDir != filepath.Join(home, ".opentalon") || len(cfg.Models.Providers) != 0 {
		t.Fatalf("default without a provider: %v %v %+v", err, src, cfg)
	}
	if _, _, err := Open("", env); err == nil {
		t.Fatal("Open accepted the default without a provider")
	}
	// A file whose channel needs a variable that is not set.
	withToken := writeConfig(t, "state: { data_dir: /srv/ot }\nchannels:\n  telegram: { enabled: true, token: \"${TELEGRAM_BOT_TOKEN}\" }\n")
	if cfg, _, err := OpenFor(withToken, env, "state"); err != nil || cfg.State.DataDir != "/srv/ot" {
		t.Fatalf("a file with an unset token: %v", err)
	}
	if _, _, err := OpenFor(withToken, env, "state", "channels.telegram"); err == nil || !strings.Contains(err.Error(), "TELEGRAM_BOT_TOKEN") {
		t.Fatalf("a command that uses the channel: %v", err)
	}
	for name, body := range map[string]string{
		"own key wrong": "state: { retention: 1m }\n",
		"unknown key":   "state: { data_dri: /srv/ot }\n",
		"bad YAML":      "state: [\n",
	} {
		if _, _, err := OpenFor(writeConfig(t, body), env, "state"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
