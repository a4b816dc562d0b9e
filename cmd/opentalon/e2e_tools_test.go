package main

// Tools and the plugin LLM API through the whole App (issue 5): the calc
// example plugin runs as a real process found in plugins.tools.plugin_dir.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// toolLLM asks for calc.evaluate("6*7") when tools are offered and no tool
// result is in the conversation yet, then answers with the result.
func toolLLM(r providertest.Received) providertest.Script {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == core.RoleTool {
		return providertest.Script{Text: "The result is " + last.Content}
	}
	for _, tool := range r.Tools {
		if tool.Plugin == "calc" && tool.Action == "evaluate" && strings.Contains(r.LastUser(), "compute") {
			return providertest.Script{ToolCalls: []core.ToolCall{{Plugin: "calc", Action: "evaluate", Args: map[string]string{"expression": "6*7"}}}}
		}
	}
	return providertest.Echo(r)
}

func TestE2EToolCallThroughApp(t *testing.T) {
	t.Parallel()
	bin := pluginBinary(t, "../../plugins/examples/calc")
	pluginDir := plugintest.Dir(t) // reachable by plugins.tools.run_as when the tests run as root
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "calc"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	llm := providertest.NewOpenAI(t)
	llm.SetReply(toolLLM)
	cfg := testConfig(t.TempDir(), llm.BaseURL(), "plugins:\n  tools:\n    plugin_dir: "+pluginDir+"\n")
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))

	h.send("please compute six times seven")
	got := h.next()
	for !strings.Contains(got, "[/plugin_output]") {
		got += "\n" + h.next()
	}
	if !strings.HasPrefix(got, "The result is [plugin_output]") || !strings.Contains(got, "42") {
		t.Fatalf("console answer = %q; want the final answer built on the wrapped tool result 42", got)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("LLM requests = %d; want 2 (tool call, then final answer)", len(reqs))
	}
	offered := false
	for _, tool := range reqs[0].Tools {
		offered = offered || (tool.Plugin == "calc" && tool.Action == "evaluate")
	}
	if !offered {
		t.Fatalf("first request offered tools %+v; want calc.evaluate", reqs[0].Tools)
	}
	var toolMsg *core.ChatMessage
	for i, m := range reqs[1].Messages {
		if m.Role == core.RoleTool {
			toolMsg = &reqs[1].Messages[i]
		}
	}
	if toolMsg == nil {
		t.Fatalf("second request has no tool message: %+v", reqs[1].Messages)
	}
	c := strings.TrimSpace(toolMsg.Content)
	if !strings.HasPrefix(c, "[plugin_output]") || !strings.HasSuffix(c, "[/plugin_output]") || !strings.Contains(c, "42") {
		t.Fatalf("LLM saw tool result %q; want 42 wrapped in [plugin_output]", toolMsg.Content)
	}
	if !strings.Contains(reqs[1].System, "[plugin_output]") {
		t.Fatalf("system prompt lacks the safety rules about [plugin_output]: %q", reqs[1].System)
	}

	// Commands still work with plugins loaded.
	h.send("/status")
	if got := h.next(); !strings.HasPrefix(got, "Model: fake/small") {
		t.Fatalf("/status first line = %q", got)
	}
}

func TestE2EPluginLLMAPI(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	const apiKey = "plugin-api-SECRET"
	_, url := startWithPluginAPI(t, llm.BaseURL(), apiKey, "")
	body := `{"messages":[{"role":"user","content":"summarize this"}],"llm_name":null}`

	tests := []struct {
		name     string
		header   map[string]string
		wantCode int
		wantText string
	}{
		{"X-API-Key", map[string]string{"X-API-Key": apiKey}, 200, "echo: summarize this"},
		{"Bearer", map[string]string{"Authorization": "Bearer " + apiKey}, 200, "echo: summarize this"},
		{"no key", nil, 401, ""},
		{"wrong key", map[string]string{"X-API-Key": "nope"}, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := llm.Count()
			code, resp := postJSON(t, url, body, tt.header)
			if code != tt.wantCode {
				t.Fatalf("status = %d %s; want %d", code, resp, tt.wantCode)
			}
			var out struct {
				Text  string `json:"text"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(resp), &out); err != nil {
				t.Fatalf("body %q is not JSON: %v", resp, err)
			}
			if tt.wantCode == 200 && out.Text != tt.wantText {
				t.Fatalf("text = %q; want %q", out.Text, tt.wantText)
			}
			if tt.wantCode != 200 && (out.Error == "" || llm.Count() != before) {
				t.Fatalf("refused request: error %q, LLM calls %d→%d; want an error and no LLM call", out.Error, before, llm.Count())
			}
		})
	}
	// llm_name picks a catalog model by alias.
	code, resp := postJSON(t, url, `{"messages":[{"role":"user","content":"hi"}],"llm_name":"small"}`, map[string]string{"X-API-Key": apiKey})
	if r, _ := llm.Last(); code != 200 || r.Model != "small" {
		t.Fatalf("llm_name small: %d %s, model sent %q", code, resp, r.Model)
	}
	// Another method gets 405 and the usage (it got the plugin routes'
	// 404 "no running plugin \"llm\"").
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-API-Key", apiKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(got), "use POST /api/plugins/llm/generate") {
		t.Fatalf("GET %s: %d %s; want 405 naming POST", url, res.StatusCode, got)
	}
}

// TestE2EListedPluginKeepsStateInStore runs the notes plugin named in
// plugins.tools.plugins (no plugin_dir): its state lands in the
// plugin_state table under the plugin's own namespace.
func TestE2EListedPluginKeepsStateInStore(t *testing.T) {
	t.Parallel()
	bin := pluginBinary(t, "../../plugins/examples/notes")
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == core.RoleTool {
			return providertest.Script{Text: "Saved."}
		}
		if strings.HasPrefix(r.LastUser(), "remember ") {
			return providertest.Script{ToolCalls: []core.ToolCall{{Plugin: "notes", Action: "add", Args: map[string]string{"text": strings.TrimPrefix(r.LastUser(), "remember ")}}}}
		}
		return providertest.Echo(r)
	})
	cfg := testConfig(t.TempDir(), llm.BaseURL(), "plugins:\n  tools:\n    plugins: ["+bin+"]\n")
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	h.send("remember buy oat milk")
	h.expect("Saved.")
	keys, err := h.app.db.PluginStateKeys(context.Background(), "notes", "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range keys {
		v, ok, err := h.app.db.PluginStateGet(context.Background(), "notes", k)
		found = found || (err == nil && ok && strings.Contains(v, "buy oat milk"))
	}
	if !found {
		t.Fatalf("plugin_state of notes has keys %v without the note", keys)
	}
}

// startWithPluginAPI starts the App with the HTTP server on a free port
// and server.api_key set, and returns the plugin LLM API's URL.
func startWithPluginAPI(t *testing.T, llmURL, apiKey, extra string) (*harness, string) {
	t.Helper()
	cfg := testConfig(t.TempDir(), llmURL, extra)
	cfg = strings.Replace(cfg, `listen: ""`, `listen: "127.0.0.1:0"`+"\n  api_key: "+apiKey, 1)
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	return h, "http://" + waitAddr(t, h.app) + plugins.GeneratePath
}
