package main

// Secrets never reach an output: every credential the config can hold is
// set to a distinctive value (through ${VAR}, as an operator sets it), the
// binary is driven down the paths where credentials tend to leak (a
// platform or provider that refuses, answers garbage or cannot be reached,
// a database that cannot be opened, the CLI's reports and files), and
// everything it wrote — stdout, stderr, the files in its data directory
// (the database included), HTTP answers — is searched for each value.
// A new path is one row of secretPaths.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/store/pgtest"
)

// The credentials, by the variable that carries each into the config. The
// part after the prefix a platform demands (xoxb-, digits:) is what is
// searched for, so a token cut in half or escaped still shows.
var leakSecrets = map[string]string{
	"TELEGRAM_BOT_TOKEN":      "7000001:SECRET-TG-1b9f7c",
	"TELEGRAM_WEBHOOK_SECRET": "SECRET-TGWH-0e0a99",
	"SLACK_BOT_TOKEN":         "xoxb-SECRET-SLB-2c8e11",
	"SLACK_APP_TOKEN":         "xapp-SECRET-SLA-3d7f22",
	"SLACK_SIGNING_SECRET":    "SECRET-SLS-4e6a33",
	"DISCORD_BOT_TOKEN":       "SECRET-DC-5f5b44",
	"OPENAI_API_KEY":          "sk-SECRET-LLM-6a4c55",
	"LLM_QUERY_KEY":           "SECRET-LLMQ-3b3dcc",
	"LLM_URL_PASSWORD":        "SECRET-LLMU-4c4edd",
	"NOTIFY_URL_TOKEN":        "SECRET-NURL-5d5fee",
	"PLATFORM_URL_PASSWORD":   "SECRET-PLU-7a7b11",
	// Not in the config: the token in the response_url of a Slack slash
	// command (a credential for 30 minutes, kept sealed in the database).
	"SLACK_RESPONSE_URL_TOKEN": "SECRET-RURL-6e6f00",
	"LLM_EXTRA_HEADER":         "SECRET-HDR-7b3d66",
	"OPENTALON_SEAL_KEY":       "SECRET-SEAL-9d1f88",
	"OPENTALON_WEBHOOK_SECRET": "SECRET-NWH-1f1baa",
	"OPENTALON_API_KEY":        "SECRET-API-2a2cbb",
	"PG_PASSWORD":              "SECRET-PG-8c2e77",
}

// leakMarker is the distinctive part of a secret value.
func leakMarker(v string) string { return v[max(0, strings.Index(v, "SECRET-")):] }

// failMode is how a fake platform or provider answers.
type failMode string

const (
	failOK      failMode = "ok"      // the LLM answers; platforms are not used
	fail401     failMode = "401"     // refuses the credential
	fail404     failMode = "404"     // a proxy's page quoting the URL asked for
	fail429     failMode = "429"     // rate limited
	fail500     failMode = "500"     // a server error quoting the request
	failBadJSON failMode = "badjson" // 200 with a body that is not JSON
	// fail200Error: 200 with an error document quoting the request, as
	// a proxy in front of an API may answer.
	fail200Error failMode = "200-error"
	failRefused  failMode = "refused" // nothing listens
	// failAfterHello: each platform's identity call (Telegram's getMe,
	// Slack's auth.test, Discord's users/@me and gateway/bot) succeeds and
	// everything after it (Discord's gateway too) fails with a 500 page
	// that quotes the request, body included.
	failAfterHello failMode = "after-hello"
)

// refusingServer answers every request as mode says, on 127.0.0.1. The
// error pages quote the request line and its headers, as a misconfigured
// proxy or an API's debug page does: whatever the client then puts in
// its error is what such a server would make it say.
func refusingServer(t *testing.T, mode failMode) string {
	t.Helper()
	if mode == failRefused {
		return "http://" + closedAddr(t)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		quote := fmt.Sprintf("%s %s (Authorization: %s, X-Extra-Auth: %s) %q", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Extra-Auth"), body)
		switch {
		case mode == failAfterHello && strings.HasSuffix(r.URL.Path, "/getMe"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"ok":true,"result":{"id":7000001,"is_bot":true,"first_name":"Leak","username":"leak_bot"}}`)
			return
		case mode == failAfterHello && strings.HasSuffix(r.URL.Path, "/users/@me"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"7000001","username":"leakbot","bot":true}`)
			return
		case mode == failAfterHello && (strings.HasSuffix(r.URL.Path, "/gateway/bot") || strings.HasSuffix(r.URL.Path, "/gateway")):
			// The gateway is this server, which refuses the upgrade.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"url":"ws://%s","shards":1,"session_start_limit":{"total":1000,"remaining":1000,"reset_after":0,"max_concurrency":1}}`, r.Host)
			return
		case mode == failAfterHello && strings.HasSuffix(r.URL.Path, "/auth.test"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"ok":true,"url":"https://leak.slack.com/","team":"Leak","user":"leakbot","team_id":"T1","user_id":"U1","bot_id":"B1"}`)
			return
		}
		switch mode {
		case fail401:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"ok":false,"error_code":401,"description":"Unauthorized: %s","error":{"message":"invalid key for %s"}}`, quote, quote)
		case fail404:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, "<html><body>404: no route for %s</body></html>", quote)
		case fail429:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: %s","error":{"message":"slow down %s"}}`, quote, quote)
		case fail500, failAfterHello:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"ok":false,"error_code":500,"description":"Internal: %s","error":{"message":"internal error serving %s"}}`, quote, quote)
		case fail200Error:
			w.Header().Set("Content-Type", "application/json")
			q, _ := json.Marshal("internal error serving " + quote)
			fmt.Fprintf(w, `{"error":{"type":"server_error","message":%s}}`, q)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, "this is not JSON: %s", quote)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// closedAddr is a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// leakLLM is an OpenAI-compatible provider that lists its model (so the
// start-up check passes) and answers chat requests as mode says.
func leakLLM(t *testing.T, mode failMode) string {
	t.Helper()
	if mode == failRefused {
		return "http://" + closedAddr(t) + "/v1"
	}
	fail := refusingServer(t, mode)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"small","object":"model"}]}`)
			return
		}
		if mode == failOK {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"small","choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
			return
		}
		resp, err := http.DefaultClient.Do(mustRequest(t, r.Method, fail+r.URL.RequestURI(), r.Header))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 64<<10)
		n, _ := resp.Body.Read(buf)
		w.Write(buf[:n])
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func mustRequest(t *testing.T, method, url string, h http.Header) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Error(err)
		return nil
	}
	req.Header = h.Clone()
	return req
}

// leakSetup is what one row's config points at.
type leakSetup struct {
	dataDir  string
	llmURL   string // the provider's base_url
	platform string // the api_url of the enabled platforms
	channels []string
	console  bool
	listen   string // server.listen; "" = off
	// pluginDir: the test binary of testdata/extplugin is installed here
	// as plugin myllm, serving provider "mine" with the LLM key, which
	// routing tries first.
	pluginDir string
	// slackEvents: Slack in Events API mode, listening here.
	slackEvents string
	// tgWebhook: Telegram in webhook mode (its secret set with
	// setWebhook), listening here.
	tgWebhook string
	state     string // extra lines under state: (a PostgreSQL DSN)
}

// config is the YAML of s, every credential through ${VAR}.
func (s leakSetup) config() string {
	on := func(ch string) bool {
		for _, c := range s.channels {
			if c == ch {
				return true
			}
		}
		return false
	}
	return fmt.Sprintf(`state:
  data_dir: %q
  seal_key: "${OPENTALON_SEAL_KEY}"
%smodels:
  providers:
    fake:
      api: openai-completions
      base_url: %q
      api_key: "${OPENAI_API_KEY}"
      headers: { X-Extra-Auth: "${LLM_EXTRA_HEADER}" }
%s  catalog:
    fake/small: { alias: small, weight: 80, context_window: 8000 }
%srouting:
  primary: %s
server:
  listen: %q
  api_key: "${OPENTALON_API_KEY}"
notifications:
  channel_down_after: 1ms
  sinks:
    - type: webhook
      url: "%s/hook/${NOTIFY_URL_TOKEN}"
      secret: "${OPENTALON_WEBHOOK_SECRET}"
channels:
  console: { enabled: %t }
  telegram:
    enabled: %t
    token: "${TELEGRAM_BOT_TOKEN}"
    api_url: %q
%s  slack:
    enabled: %t
    bot_token: "${SLACK_BOT_TOKEN}"
    app_token: "${SLACK_APP_TOKEN}"
    signing_secret: "${SLACK_SIGNING_SECRET}"
    api_url: %q
%s  discord:
    enabled: %t
    token: "${DISCORD_BOT_TOKEN}"
    api_url: %q
    register_commands: false
%s`, s.dataDir, s.state, s.llmURL, s.pluginProvider(), s.pluginCatalog(), s.primary(), s.listen, s.platform, s.console,
		on("telegram"), s.platform, s.webhook(), on("slack"), s.platform+"/api/", s.events(), on("discord"), s.platform, s.plugins())
}

func (s leakSetup) pluginProvider() string {
	if s.pluginDir == "" {
		return ""
	}
	return "    mine: { api: plugin, plugin: myllm, api_key: \"${OPENAI_API_KEY}\" }\n"
}

func (s leakSetup) pluginCatalog() string {
	if s.pluginDir == "" {
		return ""
	}
	return "    mine/m1: { alias: m1, weight: 90 }\n"
}

func (s leakSetup) primary() string {
	if s.pluginDir == "" {
		return "fake/small"
	}
	return "mine/m1"
}

func (s leakSetup) plugins() string {
	if s.pluginDir == "" {
		return ""
	}
	return fmt.Sprintf("plugins:\n  tools:\n    plugin_dir: %q\n", s.pluginDir)
}

// events is the Slack Events API block of s, if any.
func (s leakSetup) events() string {
	if s.slackEvents == "" {
		return ""
	}
	return fmt.Sprintf("    mode: events\n    events: { listen: %q, path: /slack/events }\n", s.slackEvents)
}

// webhook is the Telegram webhook block of s, if any.
func (s leakSetup) webhook() string {
	if s.tgWebhook == "" {
		return ""
	}
	return fmt.Sprintf(`    mode: webhook
    webhook: { listen: %q, url: "https://bot.example.com/telegram", secret: "${TELEGRAM_WEBHOOK_SECRET}" }
`, s.tgWebhook)
}

// leakEnv is the whole environment of a run: the secrets and extra.
func leakEnv(extra map[string]string) map[string]string {
	env := map[string]string{"PATH": os.Getenv("PATH")}
	for k, v := range leakSecrets {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// leakOutput is one named thing the binary wrote.
type leakOutput struct {
	what string
	data []byte
}

// dirOutputs are the files under dir (logs, the database and its WAL,
// backups, exports).
func dirOutputs(t *testing.T, dir string) []leakOutput {
	t.Helper()
	var outs []leakOutput
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
			return nil
		}
		outs = append(outs, leakOutput{"file " + p, b})
		return nil
	})
	return outs
}

// assertNoSecret fails for each secret found in an output, naming both.
func assertNoSecret(t *testing.T, outs []leakOutput, extra map[string]string) {
	t.Helper()
	secrets := maps.Clone(leakSecrets)
	maps.Copy(secrets, extra)
	for _, o := range outs {
		for name, v := range secrets {
			m := leakMarker(v)
			if i := strings.Index(string(o.data), m); i >= 0 {
				lo, hi := max(0, i-200), min(len(o.data), i+len(m)+80)
				t.Errorf("%s leaks %s: …%q…", o.what, name, o.data[lo:hi])
			}
		}
	}
}

// logWatch is a stderr that says when it was written to.
type logWatch struct {
	lockedBuf
	wrote chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	n, err := w.lockedBuf.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// runMainWhile is runMain with during run beside it: during may wait for
// the log to say something (wait returns the log once cond holds, or
// whatever it holds when the run ends); the run is stopped when during
// returns (it ends by itself as well when the command does).
func runMainWhile(t *testing.T, env map[string]string, stdin string, args []string, during func(wait func(cond func(log string) bool) (string, bool))) mainResult {
	t.Helper()
	var out bytes.Buffer
	logw := &logWatch{wrote: make(chan struct{}, 1)}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ended := make(chan struct{})
	wait := func(cond func(string) bool) (string, bool) {
		for {
			log := logw.String()
			if cond(log) {
				return log, true
			}
			select {
			case <-logw.wrote:
			case <-ended:
				log := logw.String()
				return log, cond(log)
			}
		}
	}
	if during == nil {
		during = func(wait func(func(string) bool) (string, bool)) { wait(func(string) bool { return false }) }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		during(wait)
	}()
	code := Main(ctx, args, Stdio{In: strings.NewReader(stdin), Out: &out, Err: logw}, lookup)
	close(ended)
	<-done
	return mainResult{code, out.String(), logw.String()}
}

// errReports counts the error reports (an "err=" attribute) in a log.
func errReports(n int) func(string) bool {
	return func(log string) bool { return strings.Count(log, "err=") >= n }
}

// fetchAll GETs each path from the server at addr, with the API key and
// without it, and returns the answers.
func fetchAll(t *testing.T, addr string, paths []string) []leakOutput {
	t.Helper()
	var outs []leakOutput
	for _, p := range paths {
		for _, key := range []string{leakSecrets["OPENTALON_API_KEY"], "", "wrong-key"} {
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("GET %s: %v", p, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if key == leakSecrets["OPENTALON_API_KEY"] && strings.HasPrefix(p, "/api/") && resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s with the key: %s %s", p, resp.Status, b)
			}
			var hdr strings.Builder
			resp.Header.Write(&hdr)
			outs = append(outs, leakOutput{fmt.Sprintf("GET %s (key %q)", p, key), append([]byte(hdr.String()), b...)})
		}
	}
	return outs
}

// leakRow is one path: a setup, a command line, and what else to read.
type leakRow struct {
	name     string
	llm      failMode
	platform failMode
	channels []string
	console  bool
	llmAll   bool // the provider fails every request, its model list too
	webhook  bool // Telegram in webhook mode
	plugin   bool // the LLM is also served by a provider plugin, tried first
	// platformUserinfo: the platforms' api_url carries a password
	// (user:password@, a proxy in front of the API).
	platformUserinfo bool
	// llmURLForm puts a credential into the provider's base_url: "query"
	// (?key=, as Gemini takes it), "userinfo" (user:password@) or "ftp"
	// (both, in a URL of the wrong scheme).
	llmURLForm string
	stdin      string
	args       []string
	env        map[string]string
	// wantFail: the run must end with a non-zero code (a refusal
	// that is not reported is no test of its report).
	wantFail bool
	// until: a gateway that keeps retrying is stopped once its log holds
	// this many error reports (an "err=" attribute).
	until int
	// dsn is the state on PostgreSQL at this OPENTALON_POSTGRES_DSN:
	// {pw} is the password, {closed} an address nothing listens on
	// ({port} its port),
	// {pg} the test server's DSN with that password added.
	dsn string
	// http: GET these paths from the running gateway (with the API
	// key, without, with a wrong one) once until error reports are in.
	http []string
	// probe runs beside the gateway once its log holds ready (and until
	// error reports), and returns what it received.
	ready string
	probe func(t *testing.T, log string) []leakOutput
	// slackEvents: Slack in Events API mode (signing_secret), listening
	// on an address the log names.
	slackEvents bool
	// then: commands run after the first on the same config ({dir} is
	// the data directory).
	then [][]string
}

func TestE2ESecretsNeverLeak(t *testing.T) {
	t.Parallel()
	all := []string{"telegram", "slack", "discord"}
	rows := []leakRow{
		{name: "config check", llm: failOK, channels: all, args: []string{"config", "check"}},
		{name: "doctor", llm: failOK, platform: fail401, channels: all, args: []string{"doctor"}},
		{name: "doctor provider 401", llm: fail401, llmAll: true, channels: all, args: []string{"doctor"}, wantFail: true},
		{name: "run provider 401 at start", llm: fail401, llmAll: true, console: true, args: []string{"run"}, wantFail: true},
		{name: "run provider 500 at start", llm: fail500, llmAll: true, console: true, args: []string{"run"}},
		{name: "status page and metrics", llm: failOK, platform: fail500, channels: all, args: []string{"run"}, until: 3,
			http: []string{"/", "/api/status", "/api/usage", "/api/affinity", "/metrics", "/healthz", "/readyz", "/nope"}},
		{name: "chat then backup and session export", llm: failOK, console: true, stdin: "hello\n", args: []string{"run"},
			then: [][]string{{"backup", "{dir}/backup.db"}, {"session", "export", "--out", "{dir}/session.yaml", "console:local"},
				{"session", "export", "--format", "json", "console:local"}, {"queue", "--status", "all"}, {"usage"}, {"doctor", "--offline"}}},
	}
	// (On PostgreSQL the console's conversation has this machine's name
	// for its thread; session export is covered on SQLite above.)
	rows = append(rows, leakRow{name: "postgres chat then pg_dump", llm: failOK, console: true, dsn: "{pgok}", stdin: "hello\n", args: []string{"run"},
		then: [][]string{{"backup", "{dir}/dump.sql"}, {"queue", "--status", "all"}, {"usage"}}})
	for _, form := range []string{"query", "userinfo"} {
		rows = append(rows,
			leakRow{name: "LLM key in base_url " + form + " config check", llm: failOK, llmURLForm: form, console: true, args: []string{"config", "check"}},
			leakRow{name: "LLM key in base_url " + form + " refused at start", llm: fail401, llmAll: true, llmURLForm: form, console: true, args: []string{"run"}, wantFail: true},
			leakRow{name: "LLM key in base_url " + form + " unreachable at start", llm: failRefused, llmURLForm: form, console: true, args: []string{"run"}, wantFail: true},
			leakRow{name: "LLM key in base_url " + form + " doctor", llm: fail401, llmURLForm: form, console: true, args: []string{"doctor"}, wantFail: true},
			leakRow{name: "LLM key in base_url " + form + " 500 in chat", llm: fail500, llmURLForm: form, console: true, stdin: "hello\n", args: []string{"run"}, until: 1},
			leakRow{name: "LLM key in base_url " + form + " 200 error in chat", llm: fail200Error, llmURLForm: form, console: true, stdin: "hello\n", args: []string{"run"}, until: 1},
		)
	}
	rows = append(rows, leakRow{name: "LLM key in a base_url that is no http URL", llm: failOK, llmURLForm: "ftp", console: true, args: []string{"config", "check"}, wantFail: true})
	for _, r := range []struct{ name, dsn string }{
		{"URL", "postgres://opentalon:{pw}@{closed}/opentalon?sslmode=disable"},
		{"key=value", "host=127.0.0.1 port={port} user=opentalon password={pw} dbname=opentalon sslmode=disable"},
		{"bad URL", "postgres://opentalon:{pw}@127.0.0.1:notaport/opentalon"},
		{"wrong password", "{pg}"},
		{"working", "{pgok}"},
	} {
		for _, args := range [][]string{{"run"}, {"doctor", "--offline"}, {"config", "check"}, {"backup", "/nonexistent/b.sql"}, {"backup", "{dir}/dump.sql"}} {
			rows = append(rows, leakRow{name: "postgres " + r.name + " " + strings.Join(args, " "), llm: failOK, console: true, dsn: r.dsn, args: args})
		}
	}
	for _, ch := range all {
		rows = append(rows, leakRow{name: "run " + ch + " after hello", llm: failOK, platform: failAfterHello, channels: []string{ch}, args: []string{"run"}, until: 2})
	}
	rows = append(rows,
		leakRow{name: "run telegram webhook after hello", llm: failOK, platform: failAfterHello, channels: []string{"telegram"}, webhook: true, args: []string{"run"}, until: 2},
		leakRow{name: "doctor --channels telegram webhook after hello", llm: failOK, platform: failAfterHello, channels: all, webhook: true, args: []string{"doctor", "--channels"}},
	)
	for _, mode := range []failMode{fail401, fail404, fail500, failBadJSON, failRefused} {
		rows = append(rows, leakRow{name: "doctor --channels platforms " + string(mode), llm: failOK, platform: mode, channels: all,
			args: []string{"doctor", "--channels"}, wantFail: true})
		for _, ch := range all {
			rows = append(rows, leakRow{name: "run " + ch + " " + string(mode), llm: failOK, platform: mode, channels: []string{ch},
				args: []string{"run"}, until: 2})
		}
	}
	rows = append(rows, leakRow{name: "slack events API requests", llm: failOK, platform: failAfterHello, channels: []string{"slack"}, slackEvents: true,
		args: []string{"run"}, ready: "Slack Events API endpoint listening", probe: probeSlackEvents})
	for _, args := range [][]string{{"config", "check"}, {"doctor", "--channels"}, {"run"}} {
		r := leakRow{name: "platform api_url with a password " + strings.Join(args, " "), llm: failOK, platform: fail500, channels: all, platformUserinfo: true, args: args}
		if args[0] == "run" {
			r.until = 3
		}
		rows = append(rows, r)
	}
	rows = append(rows, leakRow{name: "provider plugin quoting its key", llm: failOK, plugin: true, console: true, stdin: "a vendor error please\n", args: []string{"run"}, until: 1})
	for _, mode := range []failMode{fail401, fail429, fail500, failBadJSON, fail200Error, failRefused} {
		rows = append(rows, leakRow{name: "console LLM " + string(mode), llm: mode, console: true, stdin: "hello\n", args: []string{"run"}, until: 1},
			leakRow{name: "complete LLM " + string(mode), llm: mode, args: []string{"complete", "hello"}, wantFail: true})
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := leakSetup{dataDir: dir, llmURL: leakLLM(t, r.llm), channels: r.channels, console: r.console}
			if r.llmAll {
				s.llmURL = refusingServer(t, r.llm) + "/v1"
			}
			switch r.llmURLForm {
			case "query":
				s.llmURL += "?key=${LLM_QUERY_KEY}"
			case "userinfo":
				s.llmURL = strings.Replace(s.llmURL, "http://", "http://llmuser:${LLM_URL_PASSWORD}@", 1)
			case "ftp":
				s.llmURL = strings.Replace(s.llmURL, "http://", "ftp://llmuser:${LLM_URL_PASSWORD}@", 1) + "?key=${LLM_QUERY_KEY}"
			}
			if r.platform != "" {
				s.platform = refusingServer(t, r.platform)
			} else {
				s.platform = "http://" + closedAddr(t)
			}
			env := leakEnv(r.env)
			extra := map[string]string{} // secrets of this row alone
			if r.dsn != "" {
				dsn := strings.NewReplacer("{pw}", leakSecrets["PG_PASSWORD"], "{closed}", closedAddr(t), "{port}", strings.Split(closedAddr(t), ":")[1], "{pg}", pgWithPassword(t, r.dsn), "{pgok}", pgWorking(t, r.dsn, extra)).Replace(r.dsn)
				env["OPENTALON_POSTGRES_DSN"] = dsn
				s.state = "  driver: postgres\n  postgres: { dsn: \"${OPENTALON_POSTGRES_DSN}\" }\n"
			}
			if len(r.http) > 0 {
				s.listen = "127.0.0.1:0"
			}
			if r.webhook {
				s.tgWebhook = closedAddr(t)
			}
			if r.platformUserinfo {
				s.platform = strings.Replace(s.platform, "http://", "http://apiuser:${PLATFORM_URL_PASSWORD}@", 1)
			}
			if r.slackEvents {
				s.slackEvents = closedAddr(t)
			}
			if r.plugin {
				s.pluginDir = plugintest.Dir(t)
				installExt(t, s.pluginDir, "myllm", map[string]any{})
			}
			cfg := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(cfg, []byte(s.config()), 0o600); err != nil {
				t.Fatal(err)
			}
			var outs []leakOutput
			reported := true // the error reports a row with until waits for came
			var during func(wait func(func(string) bool) (string, bool))
			switch {
			case len(r.http) > 0:
				during = func(wait func(func(string) bool) (string, bool)) {
					log, ok := wait(func(log string) bool {
						return strings.Contains(log, "http server listening") && errReports(r.until)(log)
					})
					if !ok {
						t.Errorf("the gateway did not listen and report %d errors", r.until)
						return
					}
					m := regexp.MustCompile(`http server listening.* addr=(\S+)`).FindStringSubmatch(log)
					outs = append(outs, fetchAll(t, m[1], r.http)...)
				}
			case r.probe != nil:
				during = func(wait func(func(string) bool) (string, bool)) {
					log, ok := wait(func(log string) bool { return strings.Contains(log, r.ready) && errReports(r.until)(log) })
					if !ok {
						t.Errorf("the log never said %q", r.ready)
						return
					}
					outs = append(outs, r.probe(t, log)...)
				}
			case r.until > 0:
				during = func(wait func(func(string) bool) (string, bool)) { _, reported = wait(errReports(r.until)) }
			}
			args := slices.Clone(r.args)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "{dir}", dir)
			}
			res := runMainWhile(t, env, r.stdin, append([]string{"--config", cfg}, args...), during)
			t.Logf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", r.args, res.code, res.stdout, res.stderr)
			if r.wantFail && res.code == 0 {
				t.Errorf("exit 0; want the refusal reported")
			}
			// A row whose failure is neither logged nor fatal tests nothing.
			if !reported && res.code == 0 {
				t.Errorf("the run ended (exit 0) before its log held %d error reports", r.until)
			}
			outs = append(outs, leakOutput{"stdout", []byte(res.stdout)}, leakOutput{"stderr", []byte(res.stderr)})
			for _, args := range r.then {
				args = slices.Clone(args)
				for i := range args {
					args[i] = strings.ReplaceAll(args[i], "{dir}", dir)
				}
				res := runMain(t, env, "", append([]string{"--config", cfg}, args...)...)
				t.Logf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", args, res.code, res.stdout, res.stderr)
				if res.code != 0 {
					t.Errorf("%s: exit %d", args, res.code)
				}
				outs = append(outs, leakOutput{fmt.Sprint(args, " stdout"), []byte(res.stdout)}, leakOutput{fmt.Sprint(args, " stderr"), []byte(res.stderr)})
			}
			outs = append(outs, dirOutputs(t, dir)...)
			assertNoSecret(t, outs, extra)
		})
	}
}

// pgWithPassword is the test server's DSN (a fresh schema) with the
// secret as its password, when dsn asks for it.
func pgWithPassword(t *testing.T, dsn string) string {
	t.Helper()
	if !strings.Contains(dsn, "{pg}") {
		return ""
	}
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), leakSecrets["PG_PASSWORD"])
	return u.String()
}

// pgWorking is the test server's DSN (a fresh schema), when dsn asks for
// it; its password joins the row's secrets.
func pgWorking(t *testing.T, dsn string, secrets map[string]string) string {
	t.Helper()
	if !strings.Contains(dsn, "{pgok}") {
		return ""
	}
	d := pgtest.DSN(t)
	u, err := url.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	if pw, ok := u.User.Password(); ok && len(pw) >= 8 {
		secrets["test server's password"] = pw
	} else {
		t.Logf("the test server's DSN has no password to look for")
	}
	return d
}

// probeSlackEvents posts to the Events API endpoint the log names: no
// signature, a wrong one, a stale one, and correctly signed bodies Slack
// would not send; it returns the answers.
func probeSlackEvents(t *testing.T, log string) []leakOutput {
	t.Helper()
	m := regexp.MustCompile(`Slack Events API endpoint listening.* listen=(\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Errorf("no listen address in %q", log)
		return nil
	}
	endpoint := "http://" + m[1] + "/slack/events"
	sign := func(ts, body string) string {
		mac := hmac.New(sha256.New, []byte(leakSecrets["SLACK_SIGNING_SECRET"]))
		fmt.Fprintf(mac, "v0:%s:%s", ts, body)
		return "v0=" + hex.EncodeToString(mac.Sum(nil))
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	// Its response_url leads nowhere: answering it fails.
	slash := url.Values{"command": {"/status"}, "text": {""}, "user_id": {"U2"}, "channel_id": {"D1"}, "team_id": {"T1"}, "trigger_id": {"1.2.3"},
		"response_url": {"http://" + closedAddr(t) + "/commands/T1/1/" + leakSecrets["SLACK_RESPONSE_URL_TOKEN"]}}.Encode()
	var outs []leakOutput
	for _, c := range []struct{ name, ts, sig, ctype, body string }{
		{"unsigned", "", "", "application/json", `{"type":"event_callback"}`},
		{"wrong signature", now, "v0=00", "application/json", `{"type":"event_callback"}`},
		{"stale", "1000000000", sign("1000000000", `{}`), "application/json", `{}`},
		{"not JSON", now, sign(now, "nope{"), "application/json", "nope{"},
		{"challenge", now, sign(now, `{"type":"url_verification","challenge":"c1"}`), "application/json", `{"type":"url_verification","challenge":"c1"}`},
		{"odd event", now, sign(now, `{"type":"event_callback","event":{"type":"message","text":1}}`), "application/json", `{"type":"event_callback","event":{"type":"message","text":1}}`},
		{"empty command", now, sign(now, "command="), "application/x-www-form-urlencoded", "command="},
		{"slash command", now, sign(now, slash), "application/x-www-form-urlencoded", slash},
	} {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", c.ctype)
		if c.ts != "" {
			req.Header.Set("X-Slack-Request-Timestamp", c.ts)
			req.Header.Set("X-Slack-Signature", c.sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("POST %s: %v", c.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var hdr strings.Builder
		resp.Header.Write(&hdr)
		outs = append(outs, leakOutput{"Events API answer to " + c.name, append([]byte(resp.Status+"\n"+hdr.String()), b...)})
	}
	return outs
}
