package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// The conformance suite: every test here runs against both providers and
// their fake servers, complete and streaming.

const testKey = "sk-test-SECRET-0123456789"

type flavor struct {
	name string
	fake func(testing.TB) *providertest.Server
	prov func(Options) Provider
}

func flavors() []flavor {
	return []flavor{
		{"openai", providertest.NewOpenAI, func(o Options) Provider { return NewOpenAI(o) }},
		{"anthropic", providertest.NewAnthropic, func(o Options) Provider { return NewAnthropic(o) }},
	}
}

// modes runs a call as Complete or as Stream, collecting the deltas.
type mode struct {
	name   string
	stream bool
}

func modes() []mode { return []mode{{"complete", false}, {"stream", true}} }

func run(ctx context.Context, p Provider, m mode, cred Credentials, req *Request) (*Response, []string, error) {
	if !m.stream {
		r, err := p.Complete(ctx, cred, req)
		return r, nil, err
	}
	var deltas []string
	r, err := p.Stream(ctx, cred, req, func(d string) { deltas = append(deltas, d) })
	return r, deltas, err
}

func setup(t *testing.T, f flavor, o Options) (*providertest.Server, Provider) {
	t.Helper()
	s := f.fake(t)
	o.BaseURL = s.BaseURL()
	if o.ID == "" {
		o.ID = "test-" + f.name
	}
	return s, f.prov(o)
}

func each(t *testing.T, fn func(t *testing.T, f flavor, m mode)) {
	for _, f := range flavors() {
		for _, m := range modes() {
			t.Run(f.name+"/"+m.name, func(t *testing.T) { fn(t, f, m) })
		}
	}
}

func TestEchoRoundTrip(t *testing.T) {
	each(t, func(t *testing.T, f flavor, m mode) {
		s, p := setup(t, f, Options{Headers: map[string]string{"X-Extra": "yes"}})
		req := &Request{Model: "m-1", System: "be brief", Messages: []core.ChatMessage{
			{Role: core.RoleUser, Content: "first question"},
			{Role: core.RoleAssistant, Content: "first answer"},
			{Role: core.RoleUser, Content: "hello there world"},
		}}
		r, deltas, err := run(context.Background(), p, m, Credentials{APIKey: testKey}, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Text != "echo: hello there world" || r.StopReason != "stop" || r.Model != "m-1" || len(r.ToolCalls) != 0 {
			t.Fatalf("response %+v", r)
		}
		// The fake's default usage counts words: 2 system + 2 + 2 + 3 in,
		// 4 out.
		if want := (core.Usage{InputTokens: 9, OutputTokens: 4}); r.Usage != want {
			t.Fatalf("usage %+v, want %+v", r.Usage, want)
		}
		if m.stream {
			if len(deltas) < 2 || strings.Join(deltas, "") != r.Text {
				t.Fatalf("deltas %q do not make up %q", deltas, r.Text)
			}
		}
		got, _ := s.Last()
		if got.Model != "m-1" || got.System != "be brief" || got.Stream != m.stream || got.APIKey != testKey {
			t.Fatalf("fake saw %+v", got)
		}
		if !reflect.DeepEqual(got.Messages, req.Messages) {
			t.Fatalf("fake saw messages %+v", got.Messages)
		}
		if got.Header.Get("X-Extra") != "yes" {
			t.Fatal("extra header not sent")
		}
		switch f.name {
		case "openai":
			if !got.Bearer || got.Header.Get("x-api-key") != "" {
				t.Fatal("openai key must go in Authorization: Bearer only")
			}
			if m.stream && !got.IncludeUsage {
				t.Fatal("openai stream must ask for stream_options.include_usage")
			}
		case "anthropic":
			if got.Bearer || got.Header.Get("x-api-key") != testKey || got.Header.Get("anthropic-version") != "2023-06-01" {
				t.Fatalf("anthropic headers %v", got.Header)
			}
			if got.MaxTokens != AnthropicDefaultMaxTokens {
				t.Fatalf("max_tokens %d", got.MaxTokens)
			}
		}
	})
}

func TestToolCallsFromLLM(t *testing.T) {
	each(t, func(t *testing.T, f flavor, m mode) {
		s, p := setup(t, f, Options{})
		s.Enqueue(providertest.Script{
			Text: "let me check",
			ToolCalls: []core.ToolCall{
				{ID: "id-a", Plugin: "web", Action: "search", Args: map[string]string{"q": "go \"generics\""}},
				{ID: "id-b", Plugin: "calc", Action: "eval"},
				{ID: "id-c", Action: "bare"},
			},
			RawArgs: []string{"", `{"n": 3, "flag": true, "obj": {"a": [1, 2]}, "s": "x", "z": null}`, ""},
			Usage:   &core.Usage{InputTokens: 120, OutputTokens: 33},
		})
		r, _, err := run(context.Background(), p, m, Credentials{APIKey: testKey}, &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "q"}}})
		if err != nil {
			t.Fatal(err)
		}
		want := []core.ToolCall{
			{ID: "id-a", Plugin: "web", Action: "search", Args: map[string]string{"q": `go "generics"`}},
			{ID: "id-b", Plugin: "calc", Action: "eval", Args: map[string]string{"n": "3", "flag": "true", "obj": `{"a":[1,2]}`, "s": "x"}},
			{ID: "id-c", Plugin: "", Action: "bare", Args: map[string]string{}},
		}
		if !reflect.DeepEqual(r.ToolCalls, want) {
			t.Fatalf("tool calls\n got %+v\nwant %+v", r.ToolCalls, want)
		}
		if r.Text != "let me check" || r.StopReason != "tool_calls" {
			t.Fatalf("text %q stop %q", r.Text, r.StopReason)
		}
		if r.Usage != (core.Usage{InputTokens: 120, OutputTokens: 33}) {
			t.Fatalf("usage %+v", r.Usage)
		}
	})
}

func TestToolShapesToLLM(t *testing.T) {
	tools := []core.ToolSpec{{Plugin: "web", Action: "search", Description: "search the web", Params: []core.ToolParam{
		{Name: "q", Description: "query", Required: true},
		{Name: "limit", Type: "integer"},
	}}}
	history := []core.ChatMessage{
		{Role: core.RoleUser, Content: "find go and rust"},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{
			{ID: "c1", Plugin: "web", Action: "search", Args: map[string]string{"q": "go"}},
			{ID: "c2", Plugin: "web", Action: "search", Args: map[string]string{"q": "rust", "limit": "2"}},
		}},
		{Role: core.RoleTool, ToolCallID: "c1", Content: "go results"},
		{Role: core.RoleTool, ToolCallID: "c2", Content: "rust results"},
		{Role: core.RoleAssistant, Content: "both found", ToolCalls: []core.ToolCall{{ID: "c3", Plugin: "notes", Action: "save", Args: map[string]string{"t": "x"}}}},
		{Role: core.RoleTool, ToolCallID: "c3", Content: "saved"},
	}
	each(t, func(t *testing.T, f flavor, m mode) {
		s, p := setup(t, f, Options{})
		if _, _, err := run(context.Background(), p, m, Credentials{}, &Request{Model: "m", Messages: history, Tools: tools, MaxTokens: 77}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Last()
		wantTools := []core.ToolSpec{{Plugin: "web", Action: "search", Description: "search the web", Params: []core.ToolParam{
			{Name: "limit", Type: "integer"},
			{Name: "q", Type: "string", Description: "query", Required: true},
		}}}
		if !reflect.DeepEqual(got.Tools, wantTools) {
			t.Fatalf("tools\n got %+v\nwant %+v", got.Tools, wantTools)
		}
		if !reflect.DeepEqual(got.Messages, history) {
			t.Fatalf("messages\n got %+v\nwant %+v", got.Messages, history)
		}
		if got.MaxTokens != 77 || got.APIKey != "" {
			t.Fatalf("max_tokens %d key %q", got.MaxTokens, got.APIKey)
		}
		// The wire shapes themselves.
		switch f.name {
		case "openai":
			var body struct {
				Messages []struct {
					Role    string
					Content *string
				}
			}
			if err := json.Unmarshal(got.Body, &body); err != nil {
				t.Fatal(err)
			}
			roles := []string{}
			for _, m := range body.Messages {
				roles = append(roles, m.Role)
			}
			if strings.Join(roles, ",") != "user,assistant,tool,tool,assistant,tool" {
				t.Fatalf("roles %v", roles)
			}
			if body.Messages[1].Content != nil {
				t.Fatal("a tool-call-only assistant message must have content null")
			}
		case "anthropic":
			var body struct {
				Messages []struct {
					Role    string
					Content []struct{ Type string }
				}
			}
			if err := json.Unmarshal(got.Body, &body); err != nil {
				t.Fatal(err)
			}
			var shape []string
			for _, m := range body.Messages {
				var types []string
				for _, b := range m.Content {
					types = append(types, b.Type)
				}
				shape = append(shape, m.Role+":"+strings.Join(types, "+"))
			}
			want := "user:text assistant:tool_use+tool_use user:tool_result+tool_result assistant:text+tool_use user:tool_result"
			if strings.Join(shape, " ") != want {
				t.Fatalf("shape %v, want %s", shape, want)
			}
		}
	})
}

func TestCredentialHeaders(t *testing.T) {
	t.Run("openai without key sends no Authorization", func(t *testing.T) {
		s, p := setup(t, flavors()[0], Options{})
		if _, err := p.Complete(context.Background(), Credentials{}, &Request{Model: "m"}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Last()
		if got.Header.Get("Authorization") != "" || got.APIKey != "" {
			t.Fatalf("headers %v", got.Header)
		}
	})
	t.Run("anthropic oauth", func(t *testing.T) {
		s, p := setup(t, flavors()[1], Options{})
		if _, err := p.Complete(context.Background(), Credentials{APIKey: testKey, OAuth: true}, &Request{Model: "m"}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Last()
		if !got.Bearer || got.APIKey != testKey || got.Header.Get("x-api-key") != "" || got.Header.Get("anthropic-beta") == "" {
			t.Fatalf("headers %v", got.Header)
		}
	})
	t.Run("fake refusing a wrong key", func(t *testing.T) {
		for _, f := range flavors() {
			s, p := setup(t, f, Options{})
			s.RequireKey("the-right-key")
			_, err := p.Complete(context.Background(), Credentials{APIKey: testKey}, &Request{Model: "m"})
			if core.ErrorKind(err) != core.KindAuth {
				t.Fatalf("%s: got %v", f.name, err)
			}
			if _, err := p.Complete(context.Background(), Credentials{APIKey: "the-right-key"}, &Request{Model: "m"}); err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
		}
	})
}

func TestCredentialsRedacted(t *testing.T) {
	c := Credentials{APIKey: testKey}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "cred", c)
	for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), buf.String()} {
		if strings.Contains(s, testKey) {
			t.Fatalf("key leaked: %s", s)
		}
	}
	if !strings.Contains(buf.String(), "key_set=true") {
		t.Fatalf("log %s", buf.String())
	}
}

func TestLogsNeverHoldTheKey(t *testing.T) {
	each(t, func(t *testing.T, f flavor, m mode) {
		var buf bytes.Buffer
		s, p := setup(t, f, Options{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		s.Enqueue(providertest.Script{}, providertest.Script{Status: 401, Body: `{"error":{"message":"bad key ` + testKey + `"}}`})
		for range 2 {
			_, _, _ = run(context.Background(), p, m, Credentials{APIKey: testKey}, &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}})
		}
		if !strings.Contains(buf.String(), "llm call") {
			t.Fatalf("expected debug logs, got %q", buf.String())
		}
		if strings.Contains(buf.String(), testKey) {
			t.Fatalf("key in log: %s", buf.String())
		}
	})
}

func TestTimeoutsAndCancel(t *testing.T) {
	each(t, func(t *testing.T, f flavor, m mode) {
		s, p := setup(t, f, Options{Timeout: 50 * time.Millisecond})
		s.Hold()
		defer s.Release()
		req := &Request{Model: "m"}
		_, _, err := run(context.Background(), p, m, Credentials{APIKey: testKey}, req)
		if core.ErrorKind(err) != core.KindTimeout {
			t.Fatalf("provider timeout: got %v", err)
		}

		// The caller's deadline is a timeout too.
		p2 := f.prov(Options{BaseURL: s.BaseURL()})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, _, err := run(ctx, p2, m, Credentials{}, req); core.ErrorKind(err) != core.KindTimeout {
			t.Fatalf("caller deadline: got %v", err)
		}

		// The caller's cancellation is passed through, not classified.
		ctx, cancel = context.WithCancel(context.Background())
		go func() {
			_ = s.WaitRequests(context.Background(), 3)
			cancel()
		}()
		_, _, err = run(ctx, p2, m, Credentials{}, req)
		var ce *core.Error
		if !errors.Is(err, context.Canceled) || errors.As(err, &ce) {
			t.Fatalf("cancel: got %v", err)
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	each(t, func(t *testing.T, f flavor, m mode) {
		s, p := setup(t, f, Options{})
		s.Close()
		_, _, err := run(context.Background(), p, m, Credentials{APIKey: testKey}, &Request{Model: "m"})
		if core.ErrorKind(err) != core.KindUnavailable || strings.Contains(err.Error(), testKey) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestConcurrentCalls(t *testing.T) {
	for _, f := range flavors() {
		t.Run(f.name, func(t *testing.T) {
			s, p := setup(t, f, Options{})
			s.Hold()
			const n = 5
			errc := make(chan error, n)
			for i := range n {
				go func() {
					r, err := p.Complete(context.Background(), Credentials{}, &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: fmt.Sprint(i)}}})
					if err == nil && r.Text != fmt.Sprintf("echo: %d", i) {
						err = fmt.Errorf("call %d got %q", i, r.Text)
					}
					errc <- err
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.WaitInFlight(ctx, n); err != nil {
				t.Fatal(err)
			}
			s.Release()
			for range n {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			if s.MaxInFlight() != n {
				t.Fatalf("max in flight %d", s.MaxInFlight())
			}
		})
	}
}
