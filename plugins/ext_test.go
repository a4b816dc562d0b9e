package plugins

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
	pluginpb "github.com/opentalon/opentalon/proto"
	"github.com/opentalon/opentalon/store/blobtest"
)

// launchExt starts the extension helper and registers it in a fresh
// Extensions.
func launchExt(t *testing.T, o ExtOptions) (*Extensions, *Process) {
	t.Helper()
	p, err := Launch(context.Background(), helperSpec(t, "ext", "ext"), LaunchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	x := NewExtensions(o)
	x.Add(p.Cap, p.Conn())
	return x, p
}

func TestExtensionDeclarations(t *testing.T) {
	var synced []core.Schedule
	x, p := launchExt(t, ExtOptions{OnSchedules: func(plugin string, d []core.Schedule) {
		if plugin == "ext" {
			synced = d
		}
	}})
	c := p.Cap
	if len(c.Hooks) != 2 || c.Hooks[0] != (Hook{Stage: StagePre, Order: 20}) || len(c.Routes) != 8 || !c.Routes[0].Public || c.Routes[1].Method != "GET" {
		t.Fatalf("capability = %+v", c)
	}
	for _, sv := range []string{ServiceNotify, ServiceAuthorize, ServiceBlobs, ServiceProvider} {
		if !c.Offers(sv) {
			t.Errorf("the SDK did not declare %s (services %v)", sv, c.Services)
		}
	}
	if len(synced) != 1 || synced[0].Key != "digest" || synced[0].Cron != "0 9 * * *" || synced[0].Spec != "cron 0 9 * * *" || synced[0].Conversation.Channel != "console" {
		t.Fatalf("OnSchedules got %+v", synced)
	}
	if steps := x.HookSteps(); len(steps) != 2 || steps[0].Name != "plugin:ext" || steps[0].Order != 20 {
		t.Fatalf("hook steps = %+v", steps)
	}
	x.Remove("ext", nil) // another connection: not this plugin's removal
	if len(x.HookSteps()) != 2 {
		t.Fatal("Remove with another connection removed the plugin")
	}
	x.Remove("ext", p.Conn())
	if len(x.HookSteps()) != 0 || len(x.Capabilities()) != 0 {
		t.Fatal("the plugin's hooks outlived its removal")
	}
}

// A parameter's type is a JSON schema type (proto/plugin.proto): arrays
// and objects too; anything else refuses the plugin, naming the types.
func TestParameterTypes(t *testing.T) {
	for _, typ := range []string{"", "string", "number", "integer", "boolean", "array", "object"} {
		c := Capability{Name: "p", Actions: []Action{{Name: "a", Parameters: []Parameter{{Name: "x", Type: typ}}}}}
		if err := c.Validate(); err != nil {
			t.Errorf("type %q refused: %v", typ, err)
		}
	}
	c := Capability{Name: "p", Actions: []Action{{Name: "a", Parameters: []Parameter{{Name: "x", Type: "int"}}}}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `"int"`) || !strings.Contains(err.Error(), "array") {
		t.Errorf("type int: %v; want a refusal naming it and the JSON schema types", err)
	}
}

// On the wire a type is read in any case, with the names languages
// use for the JSON schema types; another name still refuses the plugin.
func TestParameterTypeNamesOnTheWire(t *testing.T) {
	for in, want := range map[string]string{"int": "integer", "Integer": "integer", "float": "number", "bool": "boolean", "str": "string",
		"String": "string", "list": "array", "dict": "object", "": ""} {
		c := capabilityFromProto(&pluginpb.PluginCapabilities{Name: "p", Actions: []*pluginpb.Action{{Name: "a",
			Parameters: []*pluginpb.Parameter{{Name: "x", Type: in}}}}})
		if got := c.Actions[0].Parameters[0].Type; got != want || c.Validate() != nil {
			t.Errorf("type %q reads as %q (%v); want %q", in, got, c.Validate(), want)
		}
	}
	c := capabilityFromProto(&pluginpb.PluginCapabilities{Name: "p", Actions: []*pluginpb.Action{{Name: "a",
		Parameters: []*pluginpb.Parameter{{Name: "x", Type: "widget"}}}}})
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `"widget"`) {
		t.Errorf("type widget: %v; want a refusal naming it", err)
	}
}

func TestExtensionValidation(t *testing.T) {
	bad := map[string]Capability{
		"stage":       {Name: "p", Hooks: []Hook{{Stage: "during"}}},
		"two pre":     {Name: "p", Hooks: []Hook{{Stage: "pre"}, {Stage: "pre"}}},
		"route path":  {Name: "p", Routes: []Route{{Path: "/abs"}}},
		"dotdot":      {Name: "p", Routes: []Route{{Path: "a/../b"}}},
		"method":      {Name: "p", Routes: []Route{{Path: "a", Method: "BREW"}}},
		"reserved":    {Name: ReservedRoutePlugin, Routes: []Route{{Path: "x"}}},
		"sched id":    {Name: "p", Schedules: []ScheduleDecl{{ID: "a b", Interval: "1h", Channel: "c", Chat: "x"}}},
		"sched both":  {Name: "p", Schedules: []ScheduleDecl{{ID: "a", Interval: "1h", Cron: "* * * * *", Channel: "c", Chat: "x"}}},
		"sched where": {Name: "p", Schedules: []ScheduleDecl{{ID: "a", Interval: "1h"}}},
		"service":     {Name: "p", Services: []string{"mind-reading"}},
	}
	for name, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: %+v validated", name, c)
		}
	}
	ok := Capability{Name: "p", Hooks: []Hook{{Stage: "pre", Order: -5}, {Stage: "post"}}, Routes: []Route{{Path: "hooks/github"}, {Path: "files/", Method: "PUT"}},
		Schedules: []ScheduleDecl{{ID: "d", Cron: "0 9 * * *", Channel: "slack", Chat: "C1"}}, Services: []string{ServiceNotify}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestPluginHooksInThePipeline(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{HookTimeout: 300 * time.Millisecond})
	h := gateway.NewOrderedHooks(nil, x)
	in := core.HookInput{In: core.Inbound{Conversation: core.ConversationKey{Channel: "slack", Chat: "C1"}, UserID: "U7"}, Session: core.Session{ID: 3}}
	ctx := context.Background()
	pre := func(text string) core.PreResult {
		t.Helper()
		in := in
		in.Text = text
		r, err := h.Pre(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := pre("hello"); r.Text != "HELLO" || r.Metadata["lang"] != "en" || r.Metadata["user"] != "U7" {
		t.Fatalf("rewrite = %+v", r)
	}
	if r := pre("please drop it"); !r.Drop || r.Reason != "not allowed here" {
		t.Fatalf("drop = %+v", r)
	}
	if r := pre("faq?"); r.Reply != "See the FAQ." || r.Metadata["answered"] != "faq" {
		t.Fatalf("direct answer = %+v", r)
	}
	// What the LLM will see passes the sanitizer.
	r := pre("smuggle this")
	if strings.Contains(r.Text, "[tool_call]") || !strings.Contains(r.Text, "[removed]") || strings.Contains(r.Metadata["note"], "<|python_tag|>") {
		t.Fatalf("smuggled = %+v; want the tool call shapes removed", r)
	}
	// Failures and a hang are skipped: the message goes on as it was.
	t0 := time.Now()
	for _, text := range []string{"crash now", "binary please", "hang on"} {
		if r := pre(text); r.Text != text || r.Drop {
			t.Fatalf("%q = %+v; want the message unchanged", text, r)
		}
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the failing hooks took %s; the hang must end at the hook timeout", d)
	}
	in.Text = "the question"
	out, err := h.Post(ctx, in, "the answer")
	if err != nil || out != "the answer (reviewed, q=the question)" {
		t.Fatalf("post = %q %v", out, err)
	}
}

func signGitHub(body string) string {
	m := hmac.New(sha256.New, []byte(extSecret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestPluginRoutes(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	var mu sync.Mutex
	var injected []Injection
	fail := error(nil)
	mux := http.NewServeMux()
	mux.Handle(RoutePattern, x.HTTPHandler(HTTPOptions{APIKey: "k3y", MaxBody: 64, Timeout: 500 * time.Millisecond,
		Inject: func(_ context.Context, in Injection) error {
			mu.Lock()
			defer mu.Unlock()
			if fail != nil {
				return fail
			}
			injected = append(injected, in)
			return nil
		}}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, body string, hdr map[string]string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		_, _ = io.Copy(b, resp.Body)
		return resp.StatusCode, b.String(), resp.Header
	}
	body := `{"action":"opened"}`
	code, text, hdr := do("POST", "/api/plugins/ext/webhook", body, map[string]string{"X-Hub-Signature-256": signGitHub(body), "X-GitHub-Delivery": "d-1"})
	if code != http.StatusAccepted || text != "queued" || hdr.Get("X-Helper") != "yes" {
		t.Fatalf("public webhook = %d %q %v", code, text, hdr)
	}
	mu.Lock()
	if len(injected) != 1 || injected[0] != (Injection{Plugin: "ext", Channel: "console", Chat: "local", Text: "webhook: " + body, UserID: "github", ID: "d-1"}) {
		t.Fatalf("injected = %+v", injected)
	}
	mu.Unlock()
	if code, _, _ := do("POST", "/api/plugins/ext/webhook", body, map[string]string{"X-Hub-Signature-256": "sha256=00"}); code != http.StatusUnauthorized {
		t.Fatalf("bad signature = %d; the plugin refuses it", code)
	}
	// A route that is not public needs the key, and the key never reaches the plugin.
	if code, _, _ := do("GET", "/api/plugins/ext/status", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("no key = %d; want 401", code)
	}
	if code, _, _ := do("GET", "/api/plugins/ext/status", "", map[string]string{"X-API-Key": "wrong"}); code != http.StatusUnauthorized {
		t.Fatalf("wrong key = %d; want 401", code)
	}
	code, text, _ = do("GET", "/api/plugins/ext/status?x=1", "", map[string]string{"Authorization": "Bearer k3y"})
	if code != 200 || text != `ok GET query=x=1 auth="" key=""` {
		t.Fatalf("status = %d %q; want the plugin's answer without the key", code, text)
	}
	code, text, _ = do("PUT", "/api/plugins/ext/files/a/b.txt", "12345", map[string]string{"X-API-Key": "k3y"})
	if code != 200 || text != "file PUT a/b.txt 5 bytes" {
		t.Fatalf("subtree route = %d %q", code, text)
	}
	for _, tt := range []struct {
		method, path, body string
		want               int
	}{
		{"DELETE", "/api/plugins/ext/status", "", http.StatusMethodNotAllowed},
		{"GET", "/api/plugins/ext/nothing", "", http.StatusNotFound},
		{"GET", "/api/plugins/nobody/status", "", http.StatusNotFound},
		{"PUT", "/api/plugins/ext/files/big", strings.Repeat("x", 65), http.StatusRequestEntityTooLarge},
		{"GET", "/api/plugins/ext/slow", "", http.StatusGatewayTimeout},
		{"GET", "/api/plugins/ext/badstatus", "", http.StatusBadGateway},
	} {
		if code, text, _ := do(tt.method, tt.path, tt.body, map[string]string{"X-API-Key": "k3y"}); code != tt.want {
			t.Errorf("%s %s = %d %s; want %d", tt.method, tt.path, code, text, tt.want)
		}
	}
	// An injection the gateway cannot take fails the request, so the sender retries.
	mu.Lock()
	fail = &core.Error{Kind: core.KindUnavailable, Msg: "database is locked"}
	mu.Unlock()
	if code, _, _ := do("POST", "/api/plugins/ext/webhook", body, map[string]string{"X-Hub-Signature-256": signGitHub(body)}); code != http.StatusServiceUnavailable {
		t.Fatalf("failed injection = %d; want 503", code)
	}
}

func TestProviderPlugin(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	ctx := context.Background()
	req := ProviderRequest{Model: "m1", APIKey: "pk", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
	r, err := x.Complete(ctx, "ext", req)
	if err != nil || r.Text != "m1 says: hi (key pk)" || r.Usage.InputTokens != 7 || r.Usage.OutputTokens != 3 || r.StopReason != "stop" {
		t.Fatalf("complete = %+v %v", r, err)
	}
	var deltas []string
	r, err = x.Stream(ctx, "ext", req, func(d string) { deltas = append(deltas, d) })
	if err != nil || strings.Join(deltas, "") != r.Text || len(deltas) < 3 {
		t.Fatalf("stream = %+v %v, deltas %q", r, err, deltas)
	}
	req.Messages[0].Content = "use a tool"
	req.Tools = []core.ToolSpec{{Plugin: "calc", Action: "evaluate", Params: []core.ToolParam{{Name: "x"}}}}
	if r, err := x.Complete(ctx, "ext", req); err != nil || len(r.ToolCalls) != 1 || !reflect.DeepEqual(r.ToolCalls[0], core.ToolCall{ID: "c1", Plugin: "calc", Action: "evaluate", Args: map[string]string{"x": "1"}}) {
		t.Fatalf("tool call = %+v %v", r, err)
	}
	req.Messages[0].Content = "429 please"
	_, err = x.Complete(ctx, "ext", req)
	if core.ErrorKind(err) != core.KindRateLimited || core.RetryAfter(err) != 2*time.Second {
		t.Fatalf("429 = %v (kind %s); want rate_limited with retry after 2s", err, core.ErrorKind(err))
	}
	if _, err := x.Complete(ctx, "gone", req); core.ErrorKind(err) != core.KindUnavailable {
		t.Fatalf("a plugin that is not running: %v; want KindUnavailable (so the router fails over)", err)
	}
}

func TestAuthorizerCachesAndFailsClosed(t *testing.T) {
	x, p := launchExt(t, ExtOptions{})
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a := &Authorizer{Ext: x, Plugin: "ext", TTL: time.Minute, Now: clock}
	ctx := context.Background()
	for user, want := range map[string]core.AuthDecision{"alice": core.AuthAllow, "root": core.AuthAdmin, "mallory": core.AuthDeny} {
		if d, err := a.Authorize(ctx, "slack", "C1", user); err != nil || d != want {
			t.Errorf("%s = %s %v; want %s", user, d, err, want)
		}
	}
	if d, err := a.Authorize(ctx, "slack", "C1", "boom"); err == nil || d != core.AuthDeny {
		t.Fatalf("failing provider = %s %v; want deny with an error", d, err)
	}
	asked := func() int {
		t.Helper()
		r, err := p.Executor().Execute(ctx, core.ToolCall{ID: "1", Plugin: "ext", Action: "seen"})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(r.Content, "auth:")
	}
	n := asked()
	a.Authorize(ctx, "slack", "C1", "alice")
	a.Authorize(ctx, "slack", "C1", "mallory")
	if asked() != n {
		t.Fatal("a cached answer asked the plugin again")
	}
	a.Authorize(ctx, "slack", "C1", "boom")
	if asked() != n+1 {
		t.Fatal("a failure was cached")
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	a.Authorize(ctx, "slack", "C1", "alice")
	if asked() != n+2 {
		t.Fatal("an expired answer was not asked again")
	}
	other := &Authorizer{Ext: x, Plugin: "nobody"}
	if d, err := other.Authorize(ctx, "slack", "C1", "alice"); err == nil || d != core.AuthDeny {
		t.Fatalf("a provider that is not running = %s %v; want deny with an error", d, err)
	}
}

func TestNotifyScheduleAndBlobs(t *testing.T) {
	x, p := launchExt(t, ExtOptions{})
	ctx := context.Background()
	if err := x.Notify(ctx, "ext", core.OpsEvent{Kind: core.EventChannelDown, Subject: "telegram", At: time.Now()}, 2); err != nil {
		t.Fatal(err)
	}
	if err := x.Notify(ctx, "ext", core.OpsEvent{Kind: "bad"}, 0); err == nil {
		t.Fatal("a refused notification is no error")
	}
	if r, _ := p.Executor().Execute(ctx, core.ToolCall{ID: "1", Plugin: "ext", Action: "seen"}); !strings.Contains(r.Content, "channel_down/telegram/2") {
		t.Fatalf("the plugin saw %q", r.Content)
	}
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	res, err := x.OnSchedule(ctx, "ext", "digest", core.Firing{At: at, Conversation: core.ConversationKey{Channel: "console", Chat: "local"}})
	if err != nil || res.Text != "digest digest at 09:00 for console:local" {
		t.Fatalf("on schedule = %+v %v", res, err)
	}
	blobtest.Run(t, &Blobs{Ext: x, Plugin: "ext"})
	var ce *core.Error
	if err := (&Blobs{Ext: x, Plugin: "nobody"}).Put(ctx, "k", nil); !errors.As(err, &ce) || ce.Kind != core.KindUnavailable {
		t.Fatalf("blob put to a plugin that is not running: %v", err)
	}
}

func TestManagerFeedsExtensions(t *testing.T) {
	x := NewExtensions(ExtOptions{})
	r := startRig(t, nil, Options{Extensions: x}, helperSpec(t, "ext", "ext"))
	r.waitEvent(t, "ext", "registered")
	if len(x.HookSteps()) != 2 {
		t.Fatalf("hook steps after registration = %d", len(x.HookSteps()))
	}
	r.m.Close()
	if len(x.HookSteps()) != 0 {
		t.Fatal("a stopped plugin's hooks are still in the pipeline")
	}
}

// A path whose dot segments, escaped or not, climb out of the route it
// matched is refused with 400 before it reaches the plugin: the plugin would otherwise
// see (and may clean) a path outside the route, public or not, the core
// checked.
func TestPluginRouteRefusesDotSegments(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	mux := http.NewServeMux()
	mux.Handle(RoutePattern, x.HTTPHandler(HTTPOptions{APIKey: "k3y"}))
	srv := httptest.NewServer(RefuseDotSegments(mux))
	defer srv.Close()
	for _, p := range []string{"files/..%2Fstatus", "files/%2e%2e/status", "files/a/%2E/b", "files%2F..%2Fstatus", "files/a%2F%2Fb",
		// Unescaped: the mux alone would redirect these to the cleaned path.
		"files/../status", "files/./b", "files//b", "./status"} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/plugins/ext/"+p, nil)
		req.Header.Set("X-API-Key", "k3y")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.HasPrefix(string(b), "file ") {
			t.Errorf("GET %s = %d %q; want 400 and the plugin not called", p, resp.StatusCode, b)
		}
	}
}

// A finished stream leaves no goroutine behind, even when the caller's
// context never ends.
func TestProviderStreamLeavesNoGoroutine(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	req := ProviderRequest{Model: "m1", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi there"}}}
	if _, err := x.Stream(context.Background(), "ext", req, nil); err != nil {
		t.Fatal(err)
	}
	settle := func(limit int) int {
		n := runtime.NumGoroutine()
		for i := 0; i < 100 && n > limit; i++ {
			time.Sleep(20 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		return n
	}
	base := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		if _, err := x.Stream(context.Background(), "ext", req, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := settle(base + 3); n > base+3 {
		t.Fatalf("%d goroutines after 20 finished streams; %d before", n, base)
	}
}

// A route is matched by its most specific path whatever the order the
// plugin declared them in: a private route below a public prefix keeps
// needing the API key.
func TestPluginRouteMostSpecificWins(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	mux := http.NewServeMux()
	mux.Handle(RoutePattern, x.HTTPHandler(HTTPOptions{APIKey: "k3y"}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path, key string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/api/plugins/ext/"+path, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("pub/secret", ""); code != http.StatusUnauthorized {
		t.Errorf("private pub/secret below the public pub/ without the key = %d; want 401", code)
	}
	if code := get("pub/secret", "k3y"); code != http.StatusOK {
		t.Errorf("pub/secret with the key = %d; want 200", code)
	}
	if code := get("pub/other", ""); code != http.StatusOK {
		t.Errorf("public pub/other = %d; want 200", code)
	}
}

// Finding 6 of issue 25: with a public pub/ and a private GET pub/secret,
// POST pub/secret matched the public route, GET pub/secret/ fell into the
// public subtree, and GET pub/%252e%252e/secret reached the plugin as
// /pub/../secret. Each now keeps the private route's rule or is refused,
// and the plugin is told which declared route matched.
func TestPluginRouteCannotBeReachedAroundItsRule(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	var queued []Injection
	mux := http.NewServeMux()
	mux.Handle(RoutePattern, x.HTTPHandler(HTTPOptions{APIKey: "k3y", Inject: func(_ context.Context, in Injection) error {
		queued = append(queued, in)
		return nil
	}}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/api/plugins/ext/"+path, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		method, path, key string
		code              int
		body              string
	}{
		{"POST", "pub/secret", "", http.StatusMethodNotAllowed, "serves pub/secret with GET"},
		{"POST", "pub/secret", "k3y", http.StatusMethodNotAllowed, "serves pub/secret with GET"},
		{"GET", "pub/secret/", "", http.StatusUnauthorized, "API key"},
		{"GET", "pub/secret/", "k3y", http.StatusOK, `route "GET" "pub/secret"`},
		{"GET", "pub/%252e%252e/secret", "", http.StatusBadRequest, "escaped twice"},
		{"GET", "pub/%2525", "", http.StatusBadRequest, "escaped twice"},
		{"GET", "pub/other", "", http.StatusOK, `route "" "pub/"`},
		{"POST", "pub/other", "", http.StatusOK, `route "" "pub/"`},
		{"HEAD", "pub/secret", "k3y", http.StatusOK, ""},
	} {
		if code, body := do(tc.method, tc.path, tc.key); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s %s (key %q) = %d %q; want %d with %q", tc.method, tc.path, tc.key, code, body, tc.code, tc.body)
		}
	}
	// A plugin that injects and then fails (or answers an invalid status)
	// gets nothing queued: its caller retries, and would queue it twice.
	if code, _ := do("POST", "inject-error", ""); code != http.StatusBadGateway {
		t.Errorf("inject-error = %d; want the plugin's 502", code)
	}
	if code, _ := do("GET", "badstatus", "k3y"); code != http.StatusBadGateway {
		t.Errorf("badstatus = %d; want 502", code)
	}
	if len(queued) != 0 {
		t.Fatalf("queued %+v; want nothing from a failed answer", queued)
	}
}

// A plugin's own key opens its own private routes (and the LLM API), not
// another plugin's; a revoked key (its process stopped) opens nothing.
func TestPluginKeysOpenOnlyTheirOwnRoutes(t *testing.T) {
	x, _ := launchExt(t, ExtOptions{})
	creds := NewCredentials()
	own, other := creds.issue(), creds.issue()
	creds.bind(own, "ext")
	creds.bind(other, "other")
	mux := http.NewServeMux()
	mux.Handle(RoutePattern, x.HTTPHandler(HTTPOptions{APIKey: "k3y", Plugins: creds}))
	mux.Handle("POST "+GeneratePath, NewGenerateHandler(&fakeGen{}, Keys{Operator: "k3y", Plugins: creds}, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, key string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, path, key string
		want              int
	}{
		{"GET", "/api/plugins/ext/status", own, http.StatusOK},
		{"GET", "/api/plugins/ext/status", other, http.StatusUnauthorized},
		{"GET", "/api/plugins/ext/status", "k3y", http.StatusOK},
		{"POST", GeneratePath, own, http.StatusOK},
		{"POST", GeneratePath, other, http.StatusOK},
		{"POST", GeneratePath, "otp_guess", http.StatusUnauthorized},
	} {
		if got := do(tc.method, tc.path, tc.key); got != tc.want {
			t.Errorf("%s %s with %.8s… = %d; want %d", tc.method, tc.path, tc.key, got, tc.want)
		}
	}
	creds.revoke(own)
	if got := do("GET", "/api/plugins/ext/status", own); got != http.StatusUnauthorized {
		t.Errorf("a revoked key = %d; want 401", got)
	}
}
