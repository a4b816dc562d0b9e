package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const secretBody = `models:
  providers:
    fake:
      api: openai-completions
      base_url: "http://127.0.0.1:9/v1"
      api_key: "${FAKE_KEY}"
      headers: { Authorization: "Bearer hdr-secret-value" }
routing: { primary: fake/m }
channels:
  telegram:
    enabled: true
    token: "tg-secret-value"
    mode: webhook
    webhook: { listen: "127.0.0.1:8443", url: "https://x.example/tg", secret: "wh-secret-value" }
  slack: { bot_token: "slack-secret-value" }
server: { api_key: "srv-secret-value" }
state: { driver: postgres, postgres: { dsn: "postgres://bot:pg-secret-value@db.example:5432/opentalon" } }
`

var secretValues = []string{"key-secret-value", "hdr-secret-value", "tg-secret-value", "wh-secret-value", "slack-secret-value", "srv-secret-value", "pg-secret-value"}

func loadSecrets(t *testing.T) *Config {
	t.Helper()
	cfg, err := Load(writeConfig(t, secretBody), MapEnv(map[string]string{"FAKE_KEY": "key-secret-value"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Models.Providers["fake"].APIKey.Value() != "key-secret-value" || cfg.Channels.Telegram.Token.Value() != "tg-secret-value" {
		t.Fatal("secrets were not loaded")
	}
	return cfg
}

func noSecrets(t *testing.T, where, out string) {
	t.Helper()
	for _, s := range secretValues {
		if strings.Contains(out, s) {
			t.Errorf("%s shows secret %q:\n%s", where, s, out)
		}
	}
}

func TestPrintRedactsSecrets(t *testing.T) {
	cfg := loadSecrets(t)
	var b bytes.Buffer
	if err := cfg.Print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	noSecrets(t, "Print", out)
	mustContain(t, out, "api_key: '***'", "token: '***'", "secret: '***'", "bot_token: '***'", "Authorization: '***'", "dsn: '***'",
		"primary: fake/m", "request_timeout: 5m0s")
	// The printed config is valid YAML of the same shape.
	var back Config
	if err := yaml.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("printed config does not parse: %v", err)
	}
	if back.Routing.Primary != "fake/m" || back.Queue.Workers != 4 || back.Queue.RequestTimeout != cfg.Queue.RequestTimeout {
		t.Errorf("round trip lost values: %+v", back.Queue)
	}
	if cfg.Redacted() != out {
		t.Error("Redacted differs from Print")
	}
}

func TestSecretsRedactedInLogsAndFormatting(t *testing.T) {
	cfg := loadSecrets(t)
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	log.Info("cfg", "key", cfg.Models.Providers["fake"].APIKey, "telegram", cfg.Channels.Telegram, "server", cfg.Server)
	text := slog.New(slog.NewTextHandler(&b, nil))
	text.Info("cfg", "provider", cfg.Models.Providers["fake"], "all", cfg)
	fmt.Fprintf(&b, "%v %+v %#v %s\n", cfg.Server, cfg.Channels.Telegram, cfg.Server, cfg.Server.APIKey)
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(j)
	out := b.String()
	noSecrets(t, "log/fmt/json output", out)
	mustContain(t, out, `"key":"***"`, "***")

	var empty Secret
	if empty.String() != "" || !Secret("x").IsSet() || empty.IsSet() {
		t.Error("empty secret should print empty and report unset")
	}
}

// A credential in a provider's base_url (user:password@, or ?key= as
// Gemini takes its key) is shown as *** by config check and by the
// problem that names a base_url that is no http(s) URL.
func TestPrintAndProblemsRedactBaseURLCredentials(t *testing.T) {
	const body = `models:
  providers:
    q: { api: openai-completions, base_url: "http://127.0.0.1:9/v1?key=${Q_KEY}" }
    u: { api: openai-completions, base_url: "http://me:${U_PASS}@127.0.0.1:9/v1" }
routing: { primary: q/m }
`
	env := MapEnv(map[string]string{"Q_KEY": "query-secret-value", "U_PASS": "userinfo-secret-value"})
	cfg, err := Load(writeConfig(t, body), env)
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Redacted()
	for _, s := range []string{"query-secret-value", "userinfo-secret-value"} {
		if strings.Contains(out, s) {
			t.Errorf("Print shows %q:\n%s", s, out)
		}
	}
	mustContain(t, out, "base_url: http://127.0.0.1:9/v1?key=***", "base_url: http://me:***@127.0.0.1:9/v1")

	bad := strings.ReplaceAll(body, "http://", "ftp://")
	_, err = Load(writeConfig(t, bad), env)
	if err == nil {
		t.Fatal("an ftp:// base_url loaded")
	}
	for _, s := range []string{"query-secret-value", "userinfo-secret-value"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the problem shows %q: %v", s, err)
		}
	}
	mustContain(t, err.Error(), `models.providers.q.base_url: "ftp://127.0.0.1:9/v1?key=***" is not an http(s) URL`)
}

// A platform's api_url may point at a proxy with a password in its user
// info: config check shows it as ***.
func TestPrintRedactsPlatformAPIURLCredentials(t *testing.T) {
	const body = `models:
  providers:
    q: { api: openai-completions, base_url: "http://127.0.0.1:9/v1" }
routing: { primary: q/m }
channels:
  telegram: { api_url: "http://me:${P}@127.0.0.1:9" }
  slack: { api_url: "http://me:${P}@127.0.0.1:9/api/" }
  discord: { api_url: "http://me:${P}@127.0.0.1:9" }
`
	cfg, err := Load(writeConfig(t, body), MapEnv(map[string]string{"P": "proxy-secret-value"}))
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Redacted()
	if strings.Contains(out, "proxy-secret-value") {
		t.Errorf("Print shows the api_url password:\n%s", out)
	}
	mustContain(t, out, "api_url: http://me:***@127.0.0.1:9\n", "api_url: http://me:***@127.0.0.1:9/api/\n")
}
