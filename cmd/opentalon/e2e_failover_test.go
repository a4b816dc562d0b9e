package main

// Credentials, failover and concurrency limits through the binary's config
// (issue 4 and the plugin LLM API of issue 5).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestE2EAuthProfilesFileRotatesAndIsGuarded(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.RequireKey("key-two-SECRET")
	dir := t.TempDir()
	pf := filepath.Join(t.TempDir(), "auth-profiles.json")
	// The first profile's key is refused (401): the second answers.
	body := `{"fake": [{"id": "fake:one", "type": "api_key", "key": "key-one-SECRET"}, {"id": "fake:two", "type": "api_key", "key": "key-two-SECRET"}]}`
	if err := os.WriteFile(pf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	y := twoModelConfig(dir, llm.BaseURL(), "auth:\n  profiles_file: "+pf+"\n  order: { fake: [fake:one, fake:two] }\n")
	y = strings.Replace(y, "      api_key: \""+cliAPIKey+"\"\n", "", 1)
	path := writeConfig(t, y)

	res := runMain(t, nil, "", "--config", path, "complete", "hi")
	if res.code == 0 || !strings.Contains(res.stderr, "chmod 600") || !strings.Contains(res.stderr, pf) {
		t.Fatalf("world-readable profiles file: exit %d, %q; want a refusal naming the file and the fix", res.code, res.stderr)
	}
	if llm.Count() != 0 {
		t.Fatal("the LLM was called with a refused profiles file")
	}
	if err := os.Chmod(pf, 0o600); err != nil {
		t.Fatal(err)
	}
	res = runMain(t, nil, "", "--config", path, "complete", "hi")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "answer from small" && strings.TrimSpace(res.stdout) != "echo: hi" {
		t.Fatalf("complete with a good profile second: exit %d, %q, %s", res.code, res.stdout, res.stderr)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 || reqs[0].APIKey != "key-one-SECRET" || reqs[1].APIKey != "key-two-SECRET" {
		t.Fatalf("keys tried = %v; want fake:one (refused) then fake:two", keysOf(reqs))
	}
	if strings.Contains(res.stdout+res.stderr, "SECRET") {
		t.Fatalf("a key reached the output: %s %s", res.stdout, res.stderr)
	}
}

// TestE2EConversationKeepsItsAuthProfile: a conversation keeps the
// credential of its last answer (seed 004's session pinning: the
// provider's prompt cache stays warm) instead of rotating on every
// message; /new starts with the next one by rotation, and /model says
// which one the conversation keeps.
func TestE2EConversationKeepsItsAuthProfile(t *testing.T) {
	t.Parallel()
	llm, cfg := twoProfilesConfig(t)
	res := runMain(t, nil, "q1\nq2\nq3\n/new\nq4\nq5\n/model\n", "--config", cfg, "--log-level", "error")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %s", res.code, res.stderr)
	}
	got := fmt.Sprint(keysOf(llm.Requests()))
	if got != "[key-one key-one key-one key-two key-two]" {
		t.Fatalf("keys by message = %s; want one key per conversation, the next one after /new", got)
	}
	if !strings.Contains(res.stdout, "Auth profile: fake:two (kept for this conversation") {
		t.Fatalf("/model output %q; want the profile the conversation keeps", res.stdout)
	}
}

// TestE2EModelAutoLetsGoOfTheCredential: after /model @id and an answer
// with it, /model auto lets the next answer take the credential rotation
// gives, instead of keeping the one that was pinned.
func TestE2EModelAutoLetsGoOfTheCredential(t *testing.T) {
	t.Parallel()
	llm, cfg := twoProfilesConfig(t)
	res := runMain(t, nil, "q1\n/model @fake:two\nq2\n/model auto\nq3\n", "--config", cfg, "--log-level", "error")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %s", res.code, res.stderr)
	}
	if got := fmt.Sprint(keysOf(llm.Requests())); got != "[key-one key-two key-one]" {
		t.Fatalf("keys by message = %s; want the pinned key, then rotation's after /model auto", got)
	}
}

// twoProfilesConfig is a fake LLM answering with its model's name and the
// path of a config whose only credentials are two API-key profiles of
// one provider, fake:one (key-one) and fake:two (key-two).
func twoProfilesConfig(t *testing.T) (*providertest.Server, string) {
	t.Helper()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	pf := filepath.Join(t.TempDir(), "auth-profiles.json")
	body := `{"fake": [{"id": "fake:one", "type": "api_key", "key": "key-one"}, {"id": "fake:two", "type": "api_key", "key": "key-two"}]}`
	if err := os.WriteFile(pf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	y := twoModelConfig(t.TempDir(), llm.BaseURL(), "auth:\n  profiles_file: "+pf+"\n")
	return llm, writeConfig(t, strings.Replace(y, "      api_key: \""+cliAPIKey+"\"\n", "", 1))
}

func keysOf(rs []providertest.Received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.APIKey)
	}
	return out
}

func TestE2EFallbackModelWhenPrimaryRateLimited(t *testing.T) {
	t.Parallel()
	limited := providertest.NewOpenAI(t)
	limited.SetReply(func(providertest.Received) providertest.Script {
		return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "120"}}
	})
	backup := providertest.NewAnthropic(t)
	backup.SetReply(modelReply)
	y := fmt.Sprintf(`state: { data_dir: %q }
models:
  providers:
    one: { api: openai-completions, base_url: %q, api_key: k1 }
    two: { api: anthropic-messages, base_url: %q, api_key: k2 }
  catalog:
    one/fast: { alias: fast, weight: 90 }
    two/steady: { alias: steady, weight: 10 }
routing: { primary: one/fast, fallbacks: [two/steady] }
server: { listen: "" }
`, t.TempDir(), limited.BaseURL(), backup.BaseURL())
	h := startApp(t, loadConfigFile(t, writeConfig(t, y)))
	h.send("hello")
	h.expect("answer from steady")
	h.send("what is the capital of Italy?")
	h.expect("answer from steady")
	// The cooling profile gets no further call within its Retry-After.
	if n := limited.Count(); n != 1 {
		t.Fatalf("rate-limited provider called %d times; want 1 (then cooled down)", n)
	}
	if n := backup.Count(); n != 2 {
		t.Fatalf("fallback provider called %d times; want 2", n)
	}
}

func TestE2EPluginLLMAPIRespectsLocalSemaphore(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	const key = "sema-SECRET"
	// The fake is on loopback: a local provider, whose calls share the
	// local limit.
	h, url := startWithPluginAPI(t, llm.BaseURL(), key, "llm: { max_concurrent_local: 1, max_concurrent_cloud: 4 }\n")
	llm.Hold()
	var wg sync.WaitGroup
	codes := make(chan int, 6)
	for range 5 {
		wg.Go(func() {
			code, _ := postJSON(t, url, `{"messages":[{"role":"user","content":"x"}]}`, map[string]string{"X-API-Key": key})
			codes <- code
		})
	}
	// A console message also needs the (local) fake: it queues behind.
	h.send("console too")
	if err := llm.WaitInFlight(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	llm.Release()
	wg.Wait()
	h.expect("echo: console too")
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("generate status %d; want 200", c)
		}
	}
	if n, m := llm.Count(), llm.MaxInFlight(); n != 6 || m != 1 {
		t.Fatalf("LLM saw %d requests, at most %d at once; want 6, never more than llm.max_concurrent_local=1", n, m)
	}
}

// TestE2ERefusingModelIsLeftForAnother (issue 25, finding 14): a model
// that refuses every request with a 400 (a parameter it does not take)
// gets a pinned user a sentence, not the operator's hint about
// models.catalog; after /model auto the learned choice (the pin left a
// signal for it) does not keep choosing it: every message is answered by
// the other model, and the refusing one is asked again only after its
// cooldown.
func TestE2ERefusingModelIsLeftForAnother(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if r.Model == "big" {
			return providertest.Script{Status: 400, Body: `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`}
		}
		return modelReply(r)
	})
	h := startApp(t, loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), ""))))
	h.send("hello there")
	h.expect("answer from small")
	h.send("/model big")
	h.readUntil("Pinned fake/big")
	drain(h)
	h.send("what is the weather like?")
	got := h.readUntil("Sorry")
	if strings.Contains(got, "models.catalog") || !strings.Contains(got, "refused") || !strings.Contains(got, "/model auto") {
		t.Fatalf("a pinned model's refusal told the user %q; want a sentence with /model auto, without the operator's hint", got)
	}
	drain(h)
	h.send("/model auto")
	drain(h)
	before := 0
	for _, r := range llm.Requests() {
		if r.Model == "big" {
			before++
		}
	}
	for i := range 6 {
		h.send(fmt.Sprintf("question number %d, please", i))
		h.expect("answer from small")
	}
	after := 0
	for _, r := range llm.Requests() {
		if r.Model == "big" {
			after++
		}
	}
	if after-before > 1 {
		t.Fatalf("the refusing model was asked %d more times for 6 messages; want at most once (then it is avoided)", after-before)
	}
}

// TestE2ESafetyFilterRefusalIsTheUsers: a provider's safety filter that
// refuses a prompt (Azure OpenAI's 400 content_filter) tells the user
// so, without the operator's hint or the provider's name, and blames
// no model: the request is not sent to another model (that would evade
// the filter), and the next message goes to the same model as before.
func TestE2ESafetyFilterRefusalIsTheUsers(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		if strings.Contains(r.LastUser(), "forbidden") {
			return providertest.Script{Status: 400, Body: `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400}}`}
		}
		return modelReply(r)
	})
	h := startApp(t, loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), ""))))
	h.send("hello there")
	h.expect("answer from small")
	h.send("something forbidden")
	got := h.readUntil("Sorry")
	if want := "Sorry, I could not answer that: the AI provider's safety filter refused this request. Try rephrasing it; if it happens again, earlier messages may be the cause: /new starts a fresh conversation."; got != want {
		t.Fatalf("a filtered prompt told the user %q; want %q", got, want)
	}
	filtered := 0
	for _, r := range llm.Requests() {
		if strings.Contains(r.LastUser(), "forbidden") {
			filtered++
		}
	}
	if filtered != 1 {
		t.Fatalf("the filtered prompt was sent %d times; want once (no other model asked)", filtered)
	}
	h.send("what is the weather like?")
	h.expect("answer from small")
}
