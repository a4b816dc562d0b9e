package providertest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

func post(t *testing.T, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

const oaBody = `{"model":"m1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"web__search","arguments":"{\"q\":\"go\",\"n\":3}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"result"}],
 "tools":[{"type":"function","function":{"name":"web__search","description":"search","parameters":{"type":"object","properties":{"q":{"type":"string","description":"query"},"n":{"type":"integer"}},"required":["q"]}}}]}`

const anBody = `{"model":"m2","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"hello there"},
 {"role":"assistant","content":[{"type":"text","text":"let me look"},{"type":"tool_use","id":"t1","name":"web__search","input":{"q":"go"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r1"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"r2"}]}]}],
 "tools":[{"name":"web__search","description":"search","input_schema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]}`

func TestDecode(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		s := NewOpenAI(t)
		st, _, _ := post(t, s.BaseURL()+"/chat/completions", oaBody, map[string]string{"Authorization": "Bearer k1"})
		if st != 200 {
			t.Fatalf("status %d", st)
		}
		r, ok := s.Last()
		if !ok || r.Model != "m1" || r.System != "be brief" || r.APIKey != "k1" || !r.Bearer || r.N != 1 {
			t.Fatalf("got %+v", r)
		}
		want := []core.ChatMessage{
			{Role: core.RoleUser, Content: "hello there"},
			{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Plugin: "web", Action: "search", Args: map[string]string{"q": "go", "n": "3"}}}},
			{Role: core.RoleTool, Content: "result", ToolCallID: "c1"},
		}
		if !reflect.DeepEqual(r.Messages, want) {
			t.Fatalf("messages %+v", r.Messages)
		}
		wantTools := []core.ToolSpec{{Plugin: "web", Action: "search", Description: "search", Params: []core.ToolParam{
			{Name: "n", Type: "integer"}, {Name: "q", Type: "string", Description: "query", Required: true}}}}
		if !reflect.DeepEqual(r.Tools, wantTools) {
			t.Fatalf("tools %+v", r.Tools)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		s := NewAnthropic(t)
		st, _, _ := post(t, s.BaseURL()+"/v1/messages", anBody, map[string]string{"x-api-key": "k2"})
		if st != 200 {
			t.Fatalf("status %d", st)
		}
		r, _ := s.Last()
		if r.Model != "m2" || r.System != "be brief" || r.APIKey != "k2" || r.Bearer || r.MaxTokens != 100 {
			t.Fatalf("got %+v", r)
		}
		want := []core.ChatMessage{
			{Role: core.RoleUser, Content: "hello there"},
			{Role: core.RoleAssistant, Content: "let me look", ToolCalls: []core.ToolCall{{ID: "t1", Plugin: "web", Action: "search", Args: map[string]string{"q": "go"}}}},
			{Role: core.RoleTool, Content: "r1", ToolCallID: "t1"},
			{Role: core.RoleTool, Content: "r2", ToolCallID: "t2"},
		}
		if !reflect.DeepEqual(r.Messages, want) {
			t.Fatalf("messages %+v", r.Messages)
		}
		if len(r.Tools) != 1 || r.Tools[0].Plugin != "web" || !r.Tools[0].Params[0].Required {
			t.Fatalf("tools %+v", r.Tools)
		}
	})
}

func TestDefaultEchoComplete(t *testing.T) {
	s := NewOpenAI(t)
	_, _, body := post(t, s.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi you"}]}`, nil)
	var resp struct {
		Model   string
		Choices []struct {
			Message struct{ Content string }
			Finish  string `json:"finish_reason"`
		}
		Usage struct{ PromptTokens, CompletionTokens int } `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err, body)
	}
	if resp.Model != "m" || resp.Choices[0].Message.Content != "echo: hi you" || resp.Choices[0].Finish != "stop" {
		t.Fatalf("got %s", body)
	}

	a := NewAnthropic(t)
	_, _, body = post(t, a.URL+"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if !strings.Contains(body, `"text":"echo: hi"`) || !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Fatalf("got %s", body)
	}
}

func TestStreamWire(t *testing.T) {
	s := NewOpenAI(t)
	s.Enqueue(Script{Text: "a b", ToolCalls: []core.ToolCall{{Plugin: "p", Action: "x", Args: map[string]string{"k": "v"}}}})
	_, hdr, body := post(t, s.BaseURL()+"/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"q"}]}`, nil)
	if hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", hdr.Get("Content-Type"))
	}
	for _, want := range []string{`"content":"a"`, `"content":" b"`, `"name":"p__x"`, `"finish_reason":"tool_calls"`, `"usage":{`, "data: [DONE]\n\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("stream lacks %s:\n%s", want, body)
		}
	}

	a := NewAnthropic(t)
	a.Enqueue(Script{Text: "a b"})
	_, _, body = post(t, a.URL+"/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"q"}]}`, nil)
	for _, want := range []string{"event: message_start\n", `"text":"a","type":"text_delta"`, `"text":" b"`, "event: ping", `"stop_reason":"end_turn"`, "event: message_stop\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("stream lacks %s:\n%s", want, body)
		}
	}
}

func TestChunks(t *testing.T) {
	for in, want := range map[string][]string{
		"":         nil,
		"one":      {"one"},
		"a bc d":   {"a", " bc", " d"},
		" lead  x": {" lead", " ", " x"},
	} {
		if got := chunks(&Script{Text: in}); !reflect.DeepEqual(got, want) {
			t.Errorf("chunks(%q) = %q, want %q", in, got, want)
		}
		if got := strings.Join(chunks(&Script{Text: in}), ""); got != in {
			t.Errorf("chunks(%q) do not join back: %q", in, got)
		}
	}
}

func TestErrorsAndQueue(t *testing.T) {
	s := NewAnthropic(t)
	s.Enqueue(Script{Status: 529}, Script{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: "custom"})
	s.SetReply(func(r Received) Script { return Script{Text: "fn:" + r.LastUser()} })
	req := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q"}]}`

	st, _, body := post(t, s.URL+"/v1/messages", req, nil)
	if st != 529 || !strings.Contains(body, "overloaded_error") {
		t.Fatalf("first: %d %s", st, body)
	}
	st, hdr, body := post(t, s.URL+"/v1/messages", req, nil)
	if st != 429 || body != "custom" || hdr.Get("Retry-After") != "7" {
		t.Fatalf("second: %d %s %v", st, body, hdr)
	}
	_, _, body = post(t, s.URL+"/v1/messages", req, nil)
	if !strings.Contains(body, "fn:q") {
		t.Fatalf("third: %s", body)
	}
	st, _, body = post(t, s.URL+"/v1/messages", `{"model":"m","messages":[]}`, nil)
	if st != 400 || !strings.Contains(body, "max_tokens") {
		t.Fatalf("missing max_tokens: %d %s", st, body)
	}
	if s.Count() != 4 {
		t.Fatalf("count %d", s.Count())
	}
}

func TestRequireKey(t *testing.T) {
	s := NewOpenAI(t)
	s.RequireKey("good")
	req := `{"model":"m","messages":[{"role":"user","content":"q"}]}`
	if st, _, body := post(t, s.BaseURL()+"/chat/completions", req, map[string]string{"Authorization": "Bearer bad"}); st != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Fatalf("bad key: %d %s", st, body)
	}
	if st, _, _ := post(t, s.BaseURL()+"/chat/completions", req, map[string]string{"Authorization": "Bearer good"}); st != 200 {
		t.Fatalf("good key: %d", st)
	}
}

func TestHoldRelease(t *testing.T) {
	s := NewOpenAI(t)
	s.Hold()
	req := `{"model":"m","messages":[{"role":"user","content":"q"}]}`
	var wg sync.WaitGroup
	results := make(chan int, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, _ := post(t, s.BaseURL()+"/chat/completions", req, nil)
			results <- st
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitInFlight(ctx, 3); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-results:
		t.Fatalf("a held request finished early with %d", st)
	default:
	}
	s.Release()
	wg.Wait()
	close(results)
	for st := range results {
		if st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	if s.InFlight() != 0 || s.MaxInFlight() != 3 || s.Count() != 3 {
		t.Fatalf("inflight %d max %d count %d", s.InFlight(), s.MaxInFlight(), s.Count())
	}
}

func TestCloseAbortsHeld(t *testing.T) {
	s := NewAnthropic(t)
	s.Hold()
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[]}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := <-errc; err == nil {
		t.Fatal("held request succeeded after Close; want a broken connection")
	}
}

func TestForgetCountsButKeepsNothing(t *testing.T) {
	s := NewOpenAI(t)
	ask := func(text string) string {
		_, _, body := post(t, s.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+text+`"}]}`, nil)
		return body
	}
	ask("kept")
	s.Forget()
	if body := ask("forgotten"); !strings.Contains(body, "echo: forgotten") {
		t.Fatalf("a forgotten request is still answered; got %s", body)
	}
	if got := s.Count(); got != 2 {
		t.Errorf("Count = %d, want 2 (forgotten requests are counted)", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitRequests(ctx, 2); err != nil {
		t.Errorf("WaitRequests(2): %v", err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].LastUser() != "kept" {
		t.Errorf("Requests = %d, want only the one before Forget", len(reqs))
	}
	if last, ok := s.Last(); !ok || last.LastUser() != "kept" || last.N != 1 {
		t.Errorf("Last = %+v, %v; want the kept request, N 1", last.LastUser(), ok)
	}
	var n int
	s.SetReply(func(r Received) Script { n = r.N; return Echo(r) })
	ask("third")
	if n != 3 {
		t.Errorf("Received.N after Forget = %d, want 3 (numbered over every request)", n)
	}
}

func TestWordsCountsAsFields(t *testing.T) {
	for _, s := range []string{"", " ", "one", " two  words ", "tab\tand\nnewline", "ünï cödé\u00a0nbsp", "trailing "} {
		if got, want := words(s), len(strings.Fields(s)); got != want {
			t.Errorf("words(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestStreamStopsWhenTheClientGoes: a slow stream (a minute of deltas)
// ends soon after its client hangs up, in both dialects, so a killed
// gateway leaves no handler running (and the server's Close waiting).
func TestStreamStopsWhenTheClientGoes(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		srv              *Server
	}{
		{"openai", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"q"}]}`, NewOpenAI(t)},
		{"anthropic", "/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"q"}]}`, NewAnthropic(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.srv.Enqueue(Script{Chunks: []string{"a", "b", "c", "d", "e", "f"}, ChunkDelay: 12 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			reqCtx, hangUp := context.WithCancel(ctx)
			req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, tc.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if err := tc.srv.WaitInFlight(ctx, 1); err != nil {
				t.Fatal(err)
			}
			hangUp()
			// Well before the second delta was due, the handler is gone.
			if err := tc.srv.wait(ctx, func() bool { return tc.srv.inFlight == 0 }, "no request in flight"); err != nil {
				t.Fatalf("the stream still runs after its client hung up: %v", err)
			}
		})
	}
}
