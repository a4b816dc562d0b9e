package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"openai style", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []sseEvent{{Data: `{"a":1}`}, {Data: "[DONE]"}}},
		{"named events, crlf", "event: ping\r\ndata: {}\r\n\r\nevent: x\r\ndata: 1\r\n\r\n", []sseEvent{{"ping", "{}"}, {"x", "1"}}},
		{"comments and blank runs", ": keep-alive\n\n\n\ndata: a\n\n", []sseEvent{{Data: "a"}}},
		{"multi-line data", "data: a\ndata: b\n\n", []sseEvent{{Data: "a\nb"}}},
		{"no space after colon", "data:x\n\n", []sseEvent{{Data: "x"}}},
		{"event without data is skipped", "event: lonely\n\ndata: y\n\n", []sseEvent{{Data: "y"}}},
		{"last event without blank line", "data: z", []sseEvent{{Data: "z"}}},
		{"unknown fields ignored", "id: 4\nretry: 10\ndata: w\n\n", []sseEvent{{Data: "w"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(c.in))
			var got []sseEvent
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	t.Run("line longer than the buffer", func(t *testing.T) {
		long := strings.Repeat("y", 5*4096+7) // several of the reader's buffers
		r := newSSEReader(iotest.OneByteReader(strings.NewReader("data: " + long + "\n\ndata: next\n\n")))
		for _, want := range []string{long, "next"} {
			ev, err := r.Next()
			if err != nil || ev.Data != want {
				t.Fatalf("event of %d bytes (%v); want %d bytes", len(ev.Data), err, len(want))
			}
		}
	})
	t.Run("line too long", func(t *testing.T) {
		r := newSSEReader(strings.NewReader("data: " + strings.Repeat("x", maxSSELine+10) + "\n\n"))
		if _, err := r.Next(); !errors.Is(err, errLineTooLong) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestDecodeArgs(t *testing.T) {
	cases := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{"", map[string]string{}, false},
		{"  {}  ", map[string]string{}, false},
		{`{"a":"x","b":2.5,"c":false,"d":[1, "two"],"e":{"f": null},"g":null}`,
			map[string]string{"a": "x", "b": "2.5", "c": "false", "d": `[1,"two"]`, "e": `{"f":null}`}, false},
		{`{"esc":"line\nnext \"q\""}`, map[string]string{"esc": "line\nnext \"q\""}, false},
		{`[1,2]`, nil, true},
		{`{"a":`, nil, true},
	}
	for _, c := range cases {
		got, err := decodeArgs([]byte(c.in))
		if (err != nil) != c.wantErr || !reflect.DeepEqual(got, c.want) {
			t.Errorf("decodeArgs(%s) = %v, %v; want %v, err %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestToolNames(t *testing.T) {
	cases := []struct{ plugin, action, name string }{
		{"web", "search", "web__search"},
		{"", "solo", "solo"},
		{"a", "b__c", "a__b__c"},
	}
	for _, c := range cases {
		if got := ToolName(c.plugin, c.action); got != c.name {
			t.Errorf("ToolName(%q,%q) = %q", c.plugin, c.action, got)
		}
		if p, a := SplitToolName(c.name); p != c.plugin || a != c.action {
			t.Errorf("SplitToolName(%q) = %q,%q", c.name, p, a)
		}
	}
}

func TestToolSchema(t *testing.T) {
	got, err := json.Marshal(toolSchema(core.ToolSpec{Params: []core.ToolParam{
		{Name: "q", Description: "query", Required: true},
		{Name: "tags", Type: "array"},
		{Name: "n", Type: "number", Required: true},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"n":{"type":"number"},"q":{"type":"string","description":"query"},"tags":{"type":"array","items":{"type":"string"}}},"required":["q","n"]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	empty, _ := json.Marshal(toolSchema(core.ToolSpec{}))
	if string(empty) != `{"type":"object","properties":{}}` {
		t.Fatalf("empty schema %s", empty)
	}
}

func TestOpenAIMaxTokensField(t *testing.T) {
	cases := []struct {
		base        string
		opt, req    int
		field, none string
		want        int
	}{
		{base: "", req: 100, field: "max_completion_tokens", none: "max_tokens", want: 100},
		{base: "http://localhost:11434/v1", req: 100, field: "max_tokens", none: "max_completion_tokens", want: 100},
		{base: "http://localhost:11434/v1", opt: 50, field: "max_tokens", none: "max_completion_tokens", want: 50},
		{base: "http://localhost:11434/v1", none: "max_tokens"},
	}
	for _, c := range cases {
		p := NewOpenAI(Options{BaseURL: c.base, MaxTokens: c.opt})
		w, _ := p.request(&Request{Model: "m", MaxTokens: c.req}, false)
		b, _ := json.Marshal(w)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if c.field != "" && m[c.field] != float64(c.want) {
			t.Errorf("%+v: body %s", c, b)
		}
		if _, ok := m[c.none]; ok {
			t.Errorf("%+v: body %s has %s", c, b, c.none)
		}
		if _, ok := m["stream"]; ok {
			t.Errorf("complete request has stream: %s", b)
		}
	}
}

func TestSystemMessagesFolded(t *testing.T) {
	// Anthropic has no system role: system messages join the top-level
	// system field. OpenAI keeps them in place.
	req := &Request{Model: "m", System: "rules", Messages: []core.ChatMessage{
		{Role: core.RoleSystem, Content: "summary of earlier turns"},
		{Role: core.RoleUser, Content: "hi"},
	}}
	for _, f := range flavors() {
		s, p := setup(t, f, Options{})
		if _, err := p.Complete(context.Background(), Credentials{}, req); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Last()
		if got.System != "rules\n\nsummary of earlier turns" || len(got.Messages) != 1 {
			t.Fatalf("%s: system %q messages %+v", f.name, got.System, got.Messages)
		}
	}
}

func TestTemperatureAndStopReasons(t *testing.T) {
	temp := 0.25
	cases := map[string][][2]string{
		"openai":    {{"length", "length"}, {"content_filter", "content_filter"}, {"function_call", "tool_calls"}},
		"anthropic": {{"max_tokens", "length"}, {"model_context_window_exceeded", "length"}, {"stop_sequence", "stop"}, {"refusal", "refusal"}},
	}
	each(t, func(t *testing.T, f flavor, m mode) {
		s, p := setup(t, f, Options{})
		for _, c := range cases[f.name] {
			s.Enqueue(providertest.Script{Text: "x y", StopReason: c[0]})
			r, _, err := run(context.Background(), p, m, Credentials{}, &Request{Model: "m", Temperature: &temp})
			if err != nil {
				t.Fatal(err)
			}
			if r.StopReason != c[1] {
				t.Errorf("%s → %q, want %q", c[0], r.StopReason, c[1])
			}
			if got, _ := s.Last(); got.Temperature == nil || *got.Temperature != temp {
				t.Errorf("temperature not sent")
			}
		}
	})
}

func TestStreamEdgeShapes(t *testing.T) {
	t.Run("openai tool calls without index, usage in last choice chunk", func(t *testing.T) {
		s, p := setup(t, flavors()[0], Options{})
		s.Enqueue(providertest.Script{Body: "" +
			"data: {\"model\":\"llama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[" +
			"{\"id\":\"a\",\"function\":{\"name\":\"p__x\",\"arguments\":\"{\\\"k\\\":1}\"}}," +
			"{\"id\":\"b\",\"function\":{\"name\":\"p__y\",\"arguments\":\"{}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}\n\n"})
		r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []core.ToolCall{{ID: "a", Plugin: "p", Action: "x", Args: map[string]string{"k": "1"}}, {ID: "b", Plugin: "p", Action: "y", Args: map[string]string{}}}
		if !reflect.DeepEqual(r.ToolCalls, want) || r.Usage != (core.Usage{InputTokens: 5, OutputTokens: 6}) || r.Model != "llama" {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("server ignoring stream answers JSON", func(t *testing.T) {
		bodies := map[string]string{
			"openai":    `{"model":"m","choices":[{"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1}}`,
			"anthropic": `{"type":"message","model":"m","content":[{"type":"text","text":"whole"}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":1,"cache_read_input_tokens":10}}`,
		}
		// A minimal server may not say it answers JSON: Go's sniffing
		// labels an unlabelled JSON body text/plain, and one keeps the
		// event-stream label it would stream with.
		for _, ct := range []string{"application/json", "", "text/plain; charset=utf-8", "text/event-stream"} {
			for _, f := range flavors() {
				s, p := setup(t, f, Options{})
				s.Enqueue(providertest.Script{Header: map[string]string{"Content-Type": ct}, Body: "\n " + bodies[f.name]})
				var deltas []string
				r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, func(d string) { deltas = append(deltas, d) })
				if err != nil || r.Text != "whole" || !reflect.DeepEqual(deltas, []string{"whole"}) || r.Usage.InputTokens != 12 || r.StopReason != "stop" {
					t.Fatalf("%s, Content-Type %q: got %+v %v %q", f.name, ct, r, err, deltas)
				}
			}
		}
	})
	// Streams as a minimal server sends them, whatever it was asked and
	// however it labels them.
	streams := map[string]string{
		"openai": "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"who\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"le\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":1}}\n\n" +
			"data: [DONE]\n\n",
		"anthropic": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"whole\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
	t.Run("stream labelled JSON is read as a stream", func(t *testing.T) {
		for _, f := range flavors() {
			s, p := setup(t, f, Options{})
			s.Enqueue(providertest.Script{Header: map[string]string{"Content-Type": "application/json"}, Body: streams[f.name]})
			r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, nil)
			if err != nil || r.Text != "whole" || r.Usage.InputTokens != 12 || r.StopReason != "stop" {
				t.Fatalf("%s: got %+v %v", f.name, r, err)
			}
		}
	})
	t.Run("server streaming a non-streaming call", func(t *testing.T) {
		for _, ct := range []string{"text/event-stream", "application/json", ""} {
			for _, f := range flavors() {
				s, p := setup(t, f, Options{})
				s.Enqueue(providertest.Script{Header: map[string]string{"Content-Type": ct}, Body: streams[f.name]})
				r, err := p.Complete(context.Background(), Credentials{}, &Request{Model: "m"})
				if err != nil || r.Text != "whole" || r.Usage.InputTokens != 12 || r.StopReason != "stop" {
					t.Fatalf("%s, Content-Type %q: got %+v %v", f.name, ct, r, err)
				}
			}
		}
	})
	t.Run("anthropic stream ending at its stop reason without message_stop", func(t *testing.T) {
		// A minimal server's stream: data lines only, no event names,
		// and nothing after the message_delta that carries the stop.
		s, p := setup(t, flavors()[1], Options{})
		s.Enqueue(providertest.Script{Body: "" +
			"data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":4}}}\n\n" +
			"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
			"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n"})
		r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, nil)
		if err != nil || r.Text != "ok" || r.StopReason != "stop" || r.Usage != (core.Usage{InputTokens: 4, OutputTokens: 2}) {
			t.Fatalf("got %+v %v", r, err)
		}
	})
	t.Run("anthropic events on single newlines, no blank lines between", func(t *testing.T) {
		s, p := setup(t, flavors()[1], Options{})
		s.Enqueue(providertest.Script{Body: "" +
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":4}}}\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"one \"}}\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"two\"}}\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n"})
		var deltas []string
		r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, func(d string) { deltas = append(deltas, d) })
		if err != nil || r.Text != "one two" || !reflect.DeepEqual(deltas, []string{"one ", "two"}) || r.StopReason != "stop" || r.Usage != (core.Usage{InputTokens: 4, OutputTokens: 2}) {
			t.Fatalf("got %+v %v, deltas %q", r, err, deltas)
		}
	})
	t.Run("openai tool call arguments as a JSON object", func(t *testing.T) {
		// Some compatible servers send the arguments object itself, not
		// a string of it.
		want := []core.ToolCall{{ID: "c1", Plugin: "calc", Action: "evaluate", Args: map[string]string{"expression": "1+1"}}}
		s, p := setup(t, flavors()[0], Options{})
		s.Enqueue(providertest.Script{Body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"calc__evaluate","arguments":{"expression":"1+1"}}}]},"finish_reason":"tool_calls"}]}`})
		r, err := p.Complete(context.Background(), Credentials{}, &Request{Model: "m"})
		if err != nil || !reflect.DeepEqual(r.ToolCalls, want) {
			t.Fatalf("complete: got %+v %v", r, err)
		}
		s.Enqueue(providertest.Script{Body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"calc__evaluate\",\"arguments\":{\"expression\":\"1+1\"}}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"})
		r, err = p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, nil)
		if err != nil || !reflect.DeepEqual(r.ToolCalls, want) {
			t.Fatalf("stream: got %+v %v", r, err)
		}
	})
	t.Run("openai chunks on single newlines, no blank lines between", func(t *testing.T) {
		s, p := setup(t, flavors()[0], Options{})
		s.Enqueue(providertest.Script{Body: "" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"one \"}}]}\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"two\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n" +
			"data: [DONE]\n"})
		var deltas []string
		r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, func(d string) { deltas = append(deltas, d) })
		if err != nil || r.Text != "one two" || !reflect.DeepEqual(deltas, []string{"one ", "two"}) || r.Usage != (core.Usage{InputTokens: 3, OutputTokens: 2}) {
			t.Fatalf("got %+v %v %q", r, err, deltas)
		}
	})
	t.Run("anthropic usage from message_delta with cache tokens", func(t *testing.T) {
		s, p := setup(t, flavors()[1], Options{})
		s.Enqueue(providertest.Script{Body: "" +
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude\",\"usage\":{\"input_tokens\":4,\"cache_creation_input_tokens\":100,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
			"event: some_future_event\ndata: {\"type\":\"some_future_event\"}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"})
		r, err := p.Stream(context.Background(), Credentials{}, &Request{Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Text != "ok" || r.Usage != (core.Usage{InputTokens: 104, OutputTokens: 42}) || r.Model != "claude" || r.StopReason != "stop" {
			t.Fatalf("got %+v", r)
		}
	})
}

// countingTransport counts the requests an injected client sends.
type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return http.DefaultTransport.RoundTrip(r)
}

func TestInjectedHTTPClientAndChunks(t *testing.T) {
	each(t, func(t *testing.T, f flavor, m mode) {
		ct := &countingTransport{}
		s, p := setup(t, f, Options{HTTPClient: &http.Client{Transport: ct}})
		s.Enqueue(providertest.Script{Chunks: []string{"he", "llo", " wor", "ld"}})
		r, deltas, err := run(context.Background(), p, m, Credentials{}, &Request{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if ct.n != 1 {
			t.Fatalf("injected client sent %d requests", ct.n)
		}
		if r.Text != "hello world" {
			t.Fatalf("text %q", r.Text)
		}
		if m.stream && !reflect.DeepEqual(deltas, []string{"he", "llo", " wor", "ld"}) {
			t.Fatalf("deltas %q", deltas)
		}
		if p.ID() != "test-"+f.name {
			t.Fatalf("id %q", p.ID())
		}
	})
}

func TestDefaults(t *testing.T) {
	if id := NewOpenAI(Options{}).ID(); id != "openai" {
		t.Errorf("openai default id %q", id)
	}
	if id := NewAnthropic(Options{}).ID(); id != "anthropic" {
		t.Errorf("anthropic default id %q", id)
	}
	if b := NewOpenAI(Options{}).c.base; b != OpenAIDefaultBaseURL {
		t.Errorf("openai default base %q", b)
	}
	if b := NewAnthropic(Options{BaseURL: "http://x/"}).c.base; b != "http://x" {
		t.Errorf("trailing slash kept: %q", b)
	}
	// An Anthropic base_url written the OpenAI way, with /v1, calls
	// /v1/messages, not /v1/v1/messages.
	for _, base := range []string{"http://x/v1", "http://x/v1/"} {
		if b := NewAnthropic(Options{BaseURL: base}).c.base; b != "http://x" {
			t.Errorf("base_url %s: base %q, want http://x", base, b)
		}
	}
}

// TestToolHistoryWithoutTools: a request that offers no tools but whose
// history holds tool calls and results (asked to answer from them, or a
// model without the tools capability) is one the API takes. Anthropic
// refuses tool blocks without tools, so they go as text there.
func TestToolHistoryWithoutTools(t *testing.T) {
	req := &Request{Model: "m", Messages: []core.ChatMessage{
		{Role: core.RoleUser, Content: "add 2 and 3"},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Plugin: "calc", Action: "add", Args: map[string]string{"a": "2", "b": "3"}}}},
		{Role: core.RoleTool, ToolCallID: "c1", Content: "5"},
	}}
	for _, f := range flavors() {
		s, p := setup(t, f, Options{})
		if _, err := p.Complete(context.Background(), Credentials{}, req); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if f.name != "anthropic" {
			continue
		}
		got, _ := s.Last()
		var text []string
		for _, m := range got.Messages {
			text = append(text, m.Content)
		}
		all := strings.Join(text, "\n")
		if !strings.Contains(all, `I called the tool calc__add with {"a":"2","b":"3"}`) || !strings.Contains(all, "result of the tool call calc__add:)\n5") {
			t.Errorf("anthropic: the calls and results are not in the request as text: %q", all)
		}
	}
}

// TestOpenAIToolsCached: the tools of each request are encoded as if no
// earlier request had been, though the provider keeps the last list's
// encoding; a list differing in any field, or changed by its caller after
// a request, is encoded again.
func TestOpenAIToolsCached(t *testing.T) {
	base := []core.ToolSpec{
		{Plugin: "web", Action: "search", Description: "Search the web", Params: []core.ToolParam{{Name: "q", Required: true}}},
		{Action: "remember", Description: "Keep a fact", Params: []core.ToolParam{{Name: "fact"}, {Name: "tags", Type: "array"}}},
	}
	edit := func(f func(ts []core.ToolSpec)) []core.ToolSpec {
		ts := make([]core.ToolSpec, len(base))
		for i, t := range base {
			t.Params = slices.Clone(t.Params)
			ts[i] = t
		}
		f(ts)
		return ts
	}
	mutated := edit(func(ts []core.ToolSpec) { ts[0].Description = "Look it up" })
	steps := []struct {
		name  string
		tools []core.ToolSpec
	}{
		{"first", base},
		{"same list again", base},
		{"an equal copy", edit(func([]core.ToolSpec) {})},
		{"a description", edit(func(ts []core.ToolSpec) { ts[0].Description = "Search" })},
		{"a parameter's type", edit(func(ts []core.ToolSpec) { ts[1].Params[0].Type = "integer" })},
		{"a parameter required", edit(func(ts []core.ToolSpec) { ts[1].Params[0].Required = true })},
		{"a plugin", edit(func(ts []core.ToolSpec) { ts[0].Plugin = "net" })},
		{"one tool fewer", base[:1]},
		{"back to the first", base},
		{"no tools", nil},
		{"a list its caller changes next", mutated},
		{"that list changed in place", mutated},
	}
	p := NewOpenAI(Options{})
	for _, s := range steps {
		if s.name == "that list changed in place" {
			mutated[0].Params[0].Name = "query"
		}
		req := &Request{Model: "m", Tools: s.tools}
		w, err := p.request(req, false)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, _ := json.Marshal(w)
		want, _ := json.Marshal(mustRequest(t, NewOpenAI(Options{}), req))
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", s.name, got, want)
		}
	}
}

func mustRequest(t *testing.T, p *OpenAI, req *Request) *oaRequest {
	t.Helper()
	w, err := p.request(req, false)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
