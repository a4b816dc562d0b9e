package main

// The command line as an acceptance suite drives it (issues 2 and 4):
// config check, strict config errors, complete --model, version, usage and
// affinity, each through Main with its exit code and streams.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

const cliAPIKey = "sk-cli-VERY-SECRET-42"

// twoModelConfig has two catalog models: small (weight 80) and big
// (weight 20), and answers "answer from <model id>" when the fake is set
// up with modelReply.
func twoModelConfig(dataDir, baseURL, extra string) string {
	return fmt.Sprintf(`state:
  data_dir: %q
models:
  providers:
    fake:
      api: openai-completions
      base_url: %q
      api_key: %q
  catalog:
    fake/small: { alias: small, weight: 80, cost: { input: 1, output: 2 } }
    fake/big:   { alias: big, weight: 20, cost: { input: 10, output: 20 } }
server:
  listen: ""
%s`, dataDir, baseURL, cliAPIKey, extra)
}

func modelReply(r providertest.Received) providertest.Script {
	return providertest.Script{Text: "answer from " + r.Model}
}

func TestE2EConfigCheckRedactsSecrets(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	// A Slack incoming webhook carries its token in the path.
	const hookToken = "XoXbHookTokenInThePath42"
	y := strings.Replace(twoModelConfig(t.TempDir(), llm.BaseURL(), "notifications:\n  sinks:\n    - { type: webhook, url: \"https://hooks.slack.com/services/T0001/B0002/"+hookToken+"\" }\n"),
		`listen: ""`, `listen: "127.0.0.1:0"`+"\n  api_key: ${OPENTALON_API_KEY}", 1)
	path := writeConfig(t, y)
	const serverKey = "server-KEY-from-env-99"
	res := runMain(t, map[string]string{"OPENTALON_API_KEY": serverKey}, "", "config", "check", "--config", path)
	if res.code != 0 {
		t.Fatalf("config check exit %d; stderr %s", res.code, res.stderr)
	}
	all := res.stdout + res.stderr
	for _, secret := range []string{cliAPIKey, serverKey, hookToken, "T0001/B0002"} {
		if strings.Contains(all, secret) {
			t.Fatalf("config check printed the secret %q:\n%s", secret, all)
		}
	}
	for _, want := range []string{"fake/small", "openai-completions", "api_key", "127.0.0.1:0", "https://hooks.slack.com/…"} {
		if !strings.Contains(res.stdout, want) {
			t.Fatalf("config check output lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestE2EConfigErrorsNameFileLineAndFix(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	tests := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"unknown key", func(y string) string { return strings.Replace(y, "  catalog:", "  catalgo:", 1) },
			[]string{"catalgo", "did you mean", "catalog"}},
		{"unknown nested key", func(y string) string { return y + "routing:\n  primery: fake/small\n" },
			[]string{"primery", "did you mean", "primary"}},
		{"bad weight", func(y string) string { return strings.Replace(y, "weight: 20", "weight: 200", 1) },
			[]string{"models.catalog.fake/big.weight", "0..100"}},
		{"unknown model", func(y string) string { return y + "routing:\n  primary: bgi\n" },
			[]string{"routing.primary", `unknown model "bgi"`, "did you mean", "big"}},
		{"unknown provider", func(y string) string { return y + "routing:\n  fallbacks: [nope/huge]\n" },
			[]string{"routing.fallbacks", "nope/huge"}},
		{"unset variable", func(y string) string { return strings.Replace(y, cliAPIKey, "${NOT_SET_ANYWHERE}", 1) },
			[]string{"NOT_SET_ANYWHERE"}},
		// yaml.v3 named line 14 (the parser counts from 0) and an unclosed list.
		{"unquoted variable in { }", func(y string) string { return y + "channels:\n  telegram: { enabled: true, token: ${TG} }\n" },
			[]string{"config.yaml:15: ", `write token: "${TG}"`}},
	}
	lineRef := regexp.MustCompile(`config\.yaml:\d+`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.edit(twoModelConfig(t.TempDir(), llm.BaseURL(), "")))
			res := runMain(t, nil, "", "--config", path, "config", "check")
			if res.code == 0 {
				t.Fatalf("config check accepted a broken config:\n%s", res.stdout)
			}
			if !lineRef.MatchString(res.stderr) {
				t.Errorf("error %q does not name config.yaml:<line>", res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("error %q lacks %q", res.stderr, w)
				}
			}
		})
	}
}

func TestE2ECompleteVersionUsageAffinity(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	path := writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), ""))

	res := runMain(t, nil, "", "version")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "opentalon ") {
		t.Fatalf("version: exit %d, %q", res.code, res.stdout)
	}

	// complete --model picks the model for this one request.
	for _, args := range [][]string{
		{"--config", path, "complete", "--model", "big", "say hi"},
		{"complete", "say hi", "--model", "big", "--config", path},
	} {
		res = runMain(t, nil, "", args...)
		if res.code != 0 || strings.TrimSpace(res.stdout) != "answer from big" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %s", args, res.code, res.stdout, res.stderr)
		}
		if r, _ := llm.Last(); r.Model != "big" || r.LastUser() != "say hi" || r.APIKey != cliAPIKey {
			t.Fatalf("complete --model big sent model %q, prompt %q", r.Model, r.LastUser())
		}
	}
	// A model of a configured provider that no list names is asked as
	// routing.primary would ask it; an unknown provider is refused.
	if res = runMain(t, nil, "", "--config", path, "complete", "--model", "fake/unlisted", "say hi"); res.code != 0 {
		t.Fatalf("complete --model fake/unlisted: exit %d, stderr %s", res.code, res.stderr)
	}
	if r, _ := llm.Last(); r.Model != "unlisted" {
		t.Fatalf("complete --model fake/unlisted sent model %q", r.Model)
	}
	if res = runMain(t, nil, "", "--config", path, "complete", "--model", "nope/x", "say hi"); res.code == 0 || !strings.Contains(res.stderr, `"nope/x"`) {
		t.Fatalf("complete --model nope/x: exit %d, stderr %s; want a refusal naming it", res.code, res.stderr)
	}
	if res = runMain(t, nil, "", "--config", path, "complete"); res.code != 2 || !strings.Contains(res.stderr, "usage: opentalon complete") {
		t.Fatalf("complete without a prompt: exit %d, %q", res.code, res.stderr)
	}

	// A console conversation (stdin closes after the last line), then the
	// ledger and the learned affinity through the CLI.
	res = runMain(t, nil, "tell me a joke\n/retry\n", "--config", path, "--log-level", "error")
	if res.code != 0 {
		t.Fatalf("run over stdin: exit %d, stderr %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, "answer from small") || !strings.Contains(res.stdout, "answer from big") {
		t.Fatalf("console output %q; want the answer and its /retry by the next model", res.stdout)
	}

	res = runMain(t, nil, "", "--config", path, "usage", "--json")
	var usage struct {
		Rows []struct {
			Key          string  `json:"key"`
			Calls        int     `json:"calls"`
			InputTokens  int64   `json:"input_tokens"`
			OutputTokens int64   `json:"output_tokens"`
			CostUSD      float64 `json:"cost_usd"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &usage); res.code != 0 || err != nil {
		t.Fatalf("usage --json: exit %d, %v, %q %s", res.code, err, res.stdout, res.stderr)
	}
	byModel := map[string]int64{}
	for _, r := range usage.Rows {
		if r.InputTokens > 0 && r.OutputTokens > 0 && r.CostUSD > 0 {
			byModel[r.Key] += int64(r.Calls)
		}
	}
	// complete ran twice on big; the console used small, then big on /retry.
	if byModel["fake/small"] != 1 || byModel["fake/big"] != 3 {
		t.Fatalf("usage rows %+v; want fake/small 1 call and fake/big 3 calls with tokens and cost", usage.Rows)
	}

	res = runMain(t, nil, "", "--config", path, "affinity", "show", "--json")
	var aff []struct {
		Task     string `json:"task"`
		Model    string `json:"model"`
		Negative int    `json:"negative"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &aff); res.code != 0 || err != nil {
		t.Fatalf("affinity show --json: exit %d, %v, %q", res.code, err, res.stdout)
	}
	rejected := false
	for _, a := range aff {
		rejected = rejected || (a.Model == "fake/small" && a.Negative >= 1)
	}
	if !rejected {
		t.Fatalf("affinity %+v; want the /retry recorded as a negative for fake/small", aff)
	}

	res = runMain(t, nil, "", "--config", path, "affinity", "reset")
	if res.code != 0 || !regexp.MustCompile(`Reset [1-9]\d* affinity rows`).MatchString(res.stdout) {
		t.Fatalf("affinity reset: exit %d, %q %s", res.code, res.stdout, res.stderr)
	}
	res = runMain(t, nil, "", "--config", path, "affinity", "show", "--json")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Fatalf("after reset affinity show --json = %q (exit %d); want []", res.stdout, res.code)
	}
}

// An empty answer is no answer: complete says so and fails, as the
// gateway apologizes, instead of printing a blank line with success.
func TestE2ECompleteEmptyAnswerFails(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(providertest.Received) providertest.Script {
		return providertest.Script{Header: map[string]string{"Content-Type": "application/json"},
			Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`}
	})
	path := writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), ""))
	for _, args := range [][]string{
		{"--config", path, "complete", "say nothing"},
		{"--config", path, "complete", "--no-stream", "say nothing"},
	} {
		res := runMain(t, nil, "", args...)
		if res.code == 0 || !strings.Contains(res.stderr, "empty answer") {
			t.Fatalf("%q: exit %d, stdout %q, stderr %s; want a failure naming the empty answer", args, res.code, res.stdout, res.stderr)
		}
	}
}
