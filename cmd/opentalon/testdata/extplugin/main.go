// Command extplugin is the plugin the end-to-end tests of the extension
// points run as a real process. What it offers is read from the JSON file
// next to its binary (<binary>.json), so one build plays every role.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/opentalon/opentalon/plugins/sdk"
)

// conf is the JSON file next to the binary.
type conf struct {
	Name string `json:"name"`
	// PreOrder and PostOrder declare the hooks (absent = none).
	PreOrder  *int `json:"pre_order"`
	PostOrder *int `json:"post_order"`
	// PreHang makes the pre hook wait until the core gives up.
	PreHang bool `json:"pre_hang"`
	// PostSuffix is appended to every answer.
	PostSuffix string `json:"post_suffix"`
	// Routes declares POST webhook (public, HMAC-signed with Secret)
	// injecting into InjectChannel/InjectChat, and GET status.
	Routes        bool   `json:"routes"`
	Secret        string `json:"secret"`
	InjectChannel string `json:"inject_channel"`
	InjectChat    string `json:"inject_chat"`
	// Probe declares GET probe (public): the plugin calls the core's API
	// with the key it was started with and reports what it got.
	Probe bool `json:"probe"`
	// Auth maps a user id to allow, admin, deny or fail.
	Auth map[string]string `json:"auth"`
	// Schedule declares one schedule answered with a text.
	Schedule *sdk.Schedule `json:"schedule"`
}

type plugin struct{ c conf }

func main() {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, err := os.ReadFile(exe + ".json")
	if err != nil {
		fmt.Fprintln(os.Stderr, "extplugin:", err)
		os.Exit(1)
	}
	var c conf
	if err := json.Unmarshal(b, &c); err != nil {
		fmt.Fprintln(os.Stderr, "extplugin:", err)
		os.Exit(1)
	}
	if err := sdk.Serve(&plugin{c: c}); err != nil {
		fmt.Fprintln(os.Stderr, "extplugin:", err)
		os.Exit(1)
	}
}

func (p *plugin) Capabilities() sdk.Capabilities {
	c := sdk.Capabilities{Name: p.c.Name, Description: "end-to-end test plugin"}
	if p.c.PreOrder != nil {
		c.Hooks = append(c.Hooks, sdk.Hook{Stage: sdk.StagePre, Order: *p.c.PreOrder})
	}
	if p.c.PostOrder != nil {
		c.Hooks = append(c.Hooks, sdk.Hook{Stage: sdk.StagePost, Order: *p.c.PostOrder})
	}
	if p.c.Routes {
		c.Routes = []sdk.Route{{Method: "POST", Path: "webhook", Public: true}, {Method: "GET", Path: "status"}}
	}
	if p.c.Probe {
		c.Routes = append(c.Routes, sdk.Route{Method: "GET", Path: "probe", Public: true})
	}
	if p.c.Schedule != nil {
		c.Schedules = []sdk.Schedule{*p.c.Schedule}
	}
	return c
}

func (p *plugin) Execute(context.Context, sdk.Call) (string, error) { return "", nil }

func (p *plugin) PreHook(ctx context.Context, r sdk.HookRequest) (sdk.HookResult, error) {
	if p.c.PreHang {
		<-ctx.Done()
		return sdk.HookResult{Text: "too late"}, nil
	}
	return sdk.HookResult{Metadata: map[string]string{"seen_by": p.c.Name}}, nil
}

func (p *plugin) PostHook(_ context.Context, r sdk.HookRequest) (sdk.HookResult, error) {
	return sdk.HookResult{Text: r.Text + p.c.PostSuffix}, nil
}

func (p *plugin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/webhook":
		body, _ := io.ReadAll(r.Body)
		if !sdk.VerifyHMAC([]byte(p.c.Secret), body, r.Header.Get("X-Signature")) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct{ Title string }
		json.Unmarshal(body, &ev)
		if err := sdk.Inject(r, sdk.Message{Channel: p.c.InjectChannel, Chat: p.c.InjectChat, Text: "New issue: " + ev.Title,
			UserID: "tracker", UserName: "Issue tracker", ID: r.Header.Get("X-Delivery")}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "queued")
	case "/status":
		fmt.Fprint(w, "ok")
	case "/probe":
		p.probe(w, r.URL.Query().Get("other"))
	default:
		http.NotFound(w, r)
	}
}

// probe calls the core's API with this plugin's key: its own private
// route, another plugin's, and the LLM API; it reports each status and
// the SHA-256 of the key.
func (p *plugin) probe(w http.ResponseWriter, other string) {
	key, api := os.Getenv(sdk.EnvAPIKey), os.Getenv(sdk.EnvAPIURL)
	call := func(method, path, body string) int {
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		res.Body.Close()
		return res.StatusCode
	}
	sum := sha256.Sum256([]byte(key))
	fmt.Fprintf(w, "own=%d other=%d llm=%d key=%s", call("GET", "/api/plugins/"+p.c.Name+"/status", ""),
		call("GET", "/api/plugins/"+other+"/status", ""),
		call("POST", "/api/plugins/llm/generate", `{"messages":[{"role":"user","content":"hi"}]}`), hex.EncodeToString(sum[:]))
}

func (p *plugin) Complete(_ context.Context, r sdk.CompletionRequest) (sdk.CompletionResponse, error) {
	last := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	if strings.Contains(last, "vendor error") {
		// A vendor SDK's error quotes the URL it called, key and all.
		return sdk.CompletionResponse{}, fmt.Errorf(`Post "https://vendor.example/v1/generate?key=%s": connection reset`, r.APIKey)
	}
	if strings.Contains(last, "429") {
		return sdk.CompletionResponse{}, &sdk.ProviderError{Kind: sdk.KindRateLimited, Message: "too many requests", RetryAfter: 90 * time.Second}
	}
	return sdk.CompletionResponse{Text: "plugin-llm " + r.Model + ": " + last, InputTokens: 11, OutputTokens: 5, Model: r.Model, StopReason: "stop"}, nil
}

func (p *plugin) Authorize(_ context.Context, r sdk.AuthRequest) (sdk.Decision, error) {
	switch p.c.Auth[r.UserID] {
	case "allow":
		return sdk.Allow, nil
	case "admin":
		return sdk.Admin, nil
	case "fail":
		return sdk.Deny, fmt.Errorf("directory unreachable")
	}
	return sdk.Deny, nil
}

func (p *plugin) OnSchedule(_ context.Context, f sdk.Firing) (sdk.ScheduleResult, error) {
	return sdk.ScheduleResult{Text: "plugin digest " + f.ID + " at " + f.At.UTC().Format("15:04")}, nil
}

func (p *plugin) Notify(context.Context, sdk.Notification) error { return nil }

func (p *plugin) PutBlob(context.Context, string, []byte) error { return nil }

func (p *plugin) GetBlob(context.Context, string) ([]byte, bool, error) { return nil, false, nil }

func (p *plugin) DeleteBlob(context.Context, string) error { return nil }
