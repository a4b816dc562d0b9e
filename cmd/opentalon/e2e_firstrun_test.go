package main

// The first run of a newcomer (issue 26, item 9): the README's command
// against a provider that cannot be reached, refuses the key, or does not
// serve the model says at once which environment variable to set.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// modelsFront is an OpenAI-compatible server that lists models on GET
// /v1/models (refusing any key but key when key is set; forbidding the
// list to every key when key is "forbidden") and passes every other
// request to the fake LLM behind it.
func modelsFront(t *testing.T, llm *providertest.Server, key string, models ...string) string {
	t.Helper()
	back, _ := url.Parse(llm.URL)
	proxy := httputil.NewSingleHostReverseProxy(back)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			proxy.ServeHTTP(w, r)
			return
		}
		if key == "forbidden" { // a key restricted to chats, as OpenAI's may be
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"message":"You have insufficient permissions for this operation. Missing scopes: api.model.read."}}`))
			return
		}
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return
		}
		type m struct {
			ID string `json:"id"`
		}
		list := struct {
			Data []m `json:"data"`
		}{}
		for _, id := range models {
			list.Data = append(list.Data, m{id})
		}
		json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestFirstRunProviderCheck(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/v1"
	closed.Close()
	tests := []struct {
		name     string
		env      map[string]string
		code     int
		stdout   string
		want     []string
		unwanted []string
	}{
		{"unreachable base URL", map[string]string{"OPENAI_BASE_URL": closedURL}, 1, "",
			[]string{"cannot reach " + closedURL, "connection refused", "OPENAI_BASE_URL", "includes /v1"}, []string{"models.providers"}},
		{"refused key", map[string]string{"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": modelsFront(t, llm, "sk-right", "gpt-4o-mini")}, exitConfig, "",
			[]string{"refused the credential (401 Unauthorized)", "set OPENAI_API_KEY to a valid key", "exit status 78"}, []string{"sk-wrong", "models.providers"}},
		{"a server that asks for a key", map[string]string{"OPENAI_BASE_URL": modelsFront(t, llm, "sk-right", "gpt-4o-mini")}, exitConfig, "",
			[]string{"refused the credential (401 Unauthorized)", "the server asks for a key: set OPENAI_API_KEY to it", "exit status 78"}, []string{"models.providers"}},
		{"model not served", map[string]string{"OPENAI_BASE_URL": modelsFront(t, llm, "", "llama3.1:latest", "qwen2.5:latest"), "OPENTALON_MODEL": "llama3.3"}, 0, "echo: hello\n",
			[]string{"model local/llama3.3 is not among the models", "llama3.1:latest, qwen2.5:latest", "set OPENTALON_MODEL"}, nil},
		{"model served as :latest", map[string]string{"OPENAI_BASE_URL": modelsFront(t, llm, "", "llama3.2:latest")}, 0, "echo: hello\n",
			nil, []string{"WARN"}},
		{"a key that may not list models", map[string]string{"OPENAI_API_KEY": "sk-restricted", "OPENAI_BASE_URL": modelsFront(t, llm, "forbidden")}, 0, "echo: hello\n",
			nil, []string{"refused", "WARN"}},
		{"base URL without /v1", map[string]string{"OPENAI_BASE_URL": strings.TrimSuffix(modelsFront(t, llm, "", "llama3.2"), "/v1")}, -1, "",
			[]string{"usually ends in /v1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir(), "OPENTALON_LISTEN": ""}
			for k, v := range tt.env {
				env[k] = v
			}
			res := runMain(t, env, "hello\n")
			if tt.code >= 0 && (res.code != tt.code || res.stdout != tt.stdout) {
				t.Fatalf("exit %d, stdout %q; want %d, %q; stderr:\n%s", res.code, res.stdout, tt.code, tt.stdout, res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, res.stderr)
				}
			}
			for _, u := range tt.unwanted {
				if strings.Contains(res.stderr, u) {
					t.Errorf("stderr holds %q:\n%s", u, res.stderr)
				}
			}
		})
	}
}

// doctorConfig is a config whose catalog names a model the provider at
// base lists (small-model) and one it does not (big-modle).
func doctorConfig(dataDir, base string) string {
	return fmt.Sprintf(`state: { data_dir: %q }
models:
  providers:
    fake: { api: openai-completions, base_url: %q, api_key: test-key }
  catalog:
    fake/small-model: { alias: small, weight: 80 }
    fake/big-modle:   { alias: big, weight: 20 }
routing: { primary: small }
server: { listen: "" }
`, dataDir, base)
}

// doctor checks the catalog against the models the provider lists.
func TestDoctorWarnsOfAModelTheProviderDoesNotServe(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	base := modelsFront(t, llm, "test-key", "small-model")
	path := writeConfig(t, doctorConfig(t.TempDir(), base))
	res := runMain(t, nil, "", "--config", path, "doctor")
	if res.code != 0 || !regexp.MustCompile(`(?m)^warn\s+provider fake: model fake/big-modle is not among the models .*/v1/models lists \(small-model\); check the model id`).MatchString(res.stdout) {
		t.Fatalf("doctor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout, "fake/small-model is not") {
		t.Errorf("doctor warned of a model the provider lists:\n%s", res.stdout)
	}
}

// doctor agrees with run on a plugin_dir that does not exist yet: run
// creates it, so doctor does not fail it.
func TestDoctorOnAPluginDirRunCreates(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	base := modelsFront(t, llm, "test-key", "small-model")
	path := writeConfig(t, doctorConfig(t.TempDir(), base)+fmt.Sprintf("plugins:\n  tools: { plugin_dir: %q }\n", filepath.Join(t.TempDir(), "plugins")))
	res := runMain(t, nil, "", "--config", path, "doctor")
	if res.code != 0 || !regexp.MustCompile(`(?m)^ok\s+plugin dir: .* does not exist yet; opentalon run creates it`).MatchString(res.stdout) {
		t.Fatalf("doctor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// doctor asks a provider with the key of the default profiles file
// (<data_dir>/auth-profiles.json), as run does, when the config has none.
func TestDoctorUsesTheDefaultProfilesFile(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	llm.RequireKey("file-key")
	base := modelsFront(t, llm, "file-key", "small-model")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth-profiles.json"), []byte(`{"fake":[{"id":"fake:work","type":"api_key","key":"file-key"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, fmt.Sprintf(`state: { data_dir: %q }
models:
  providers:
    fake: { api: openai-completions, base_url: %q }
  catalog:
    fake/small-model: { alias: small, weight: 80 }
routing: { primary: small }
server: { listen: "" }
`, dir, base))
	res := runMain(t, nil, "", "--config", path, "doctor")
	if res.code != 0 || !regexp.MustCompile(`(?m)^ok\s+provider fake:`).MatchString(res.stdout) {
		t.Fatalf("doctor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// doctor on the built-in default names the variables the provider came
// from, not config keys the user does not have.
func TestDoctorOnTheDefaultNamesTheVariables(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/v1"
	closed.Close()
	llm := providertest.NewOpenAI(t)
	llm.RequireKey("sk-right")
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OPENAI_BASE_URL": closedURL}, "cannot reach the server"},
		{map[string]string{"OPENAI_BASE_URL": llm.BaseURL(), "OPENAI_API_KEY": "sk-wrong"}, "set OPENAI_API_KEY to a valid key"},
	} {
		env := map[string]string{"HOME": t.TempDir()}
		for k, v := range tc.env {
			env[k] = v
		}
		res := runMain(t, env, "", "doctor", "--offline=false")
		line := regexp.MustCompile(`(?m)^FAIL\s+provider \w+: .*$`).FindString(res.stdout)
		if res.code != 1 || !strings.Contains(line, tc.want) || !strings.Contains(line, "OPENAI_") || strings.Contains(line, "models.providers") {
			t.Errorf("doctor with %v: exit %d, line %q\n%s", tc.env, res.code, line, res.stdout)
		}
	}
}

// doctor judges a data directory that does not exist yet by the nearest
// one above it, where run would create it: under a file it fails, as
// run does; in a directory this user may write it is fine.
func TestDoctorDataDirThatDoesNotExistYet(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	aFile := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir  string
		code int
		want string
	}{
		{filepath.Join(aFile, "data"), 1, "FAIL  data dir: " + aFile + " is a file, not a directory: not a directory; set state.data_dir to a directory\n"},
		{filepath.Join(t.TempDir(), "new", "data"), 0, "ok    data dir: "},
	} {
		path := writeConfig(t, testConfig(tt.dir, llm.BaseURL(), ""))
		res := runMain(t, nil, "", "--config", path, "doctor", "--offline")
		if res.code != tt.code || !strings.Contains(res.stdout, tt.want) {
			t.Errorf("doctor with data_dir %s: exit %d, want %d and %q:\n%s%s", tt.dir, res.code, tt.code, tt.want, res.stdout, res.stderr)
		}
		if _, err := os.Stat(tt.dir); err == nil {
			t.Errorf("doctor created %s", tt.dir)
		}
	}
}

// TestDoctorDataDirOthersMayList: a data directory others may enter but
// not write passes (the database in it is the owner's alone), and doctor
// does not call it private.
func TestDoctorDataDirOthersMayList(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	for _, tt := range []struct {
		mode os.FileMode
		want string
	}{
		{0o755, "is writable (mode 0755: others may list it, not read the database; chmod 700 "},
		{0o700, "is writable and private (mode 0700)"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, tt.mode) // whatever the umask
		path := writeConfig(t, testConfig(dir, llm.BaseURL(), ""))
		res := runMain(t, nil, "", "--config", path, "doctor", "--offline")
		if line := "ok    data dir: " + dir + " " + tt.want; res.code != 0 || !strings.Contains(res.stdout, line) {
			t.Errorf("doctor with a data_dir of mode %04o: exit %d, want 0 and %q:\n%s%s", tt.mode, res.code, line, res.stdout, res.stderr)
		}
	}
}

// `opentalon complete` under the built-in default (issue 26, item 9): a
// provider that cannot be reached, or refuses the key, is told with the
// environment variable to set, as run's start-up check tells it, not
// with models.providers.<id>.base_url, a key this user does not have.
func TestCompleteNamesTheVariableToSet(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/v1"
	closed.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	}))
	t.Cleanup(refusing.Close)
	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"unreachable base URL", map[string]string{"OPENAI_BASE_URL": closedURL},
			[]string{"cannot reach " + closedURL, "set OPENAI_BASE_URL", "includes /v1"}},
		{"refused key", map[string]string{"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": refusing.URL + "/v1"},
			[]string{"refused the credential (401 Unauthorized)", "set OPENAI_API_KEY to a valid key"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			res := runMain(t, env, "", "complete", "hello")
			if res.code == 0 || res.stdout != "" {
				t.Fatalf("exit %d, stdout %q; want a failure", res.code, res.stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "opentalon: ") && strings.Contains(res.stderr[strings.LastIndex(res.stderr, "opentalon: "):], "models.providers") {
				t.Errorf("the error names a config key the built-in default does not have:\n%s", res.stderr)
			}
		})
	}
}
