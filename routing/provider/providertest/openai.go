package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// openAI speaks the Chat Completions wire format.
type openAI struct{}

func (openAI) paths() []string {
	return []string{"/v1/chat/completions", "/chat/completions", "/v1/audio/transcriptions", "/audio/transcriptions"}
}
func (openAI) basePath() string { return "/v1" }

type oaRequest struct {
	Model         string      `json:"model"`
	Messages      []oaMessage `json:"messages"`
	Tools         []oaTool    `json:"tools"`
	Stream        bool        `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"` // string, null or parts
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// contentText reads a content that is a string, null, or an array of
// {"type":"text","text":...} parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func (openAI) decode(r *Received) error {
	if strings.HasSuffix(r.Path, "/audio/transcriptions") {
		return decodeTranscription(r)
	}
	var q oaRequest
	if err := json.Unmarshal(r.Body, &q); err != nil {
		return err
	}
	r.Model, r.Stream, r.Temperature = q.Model, q.Stream, q.Temperature
	r.IncludeUsage = q.StreamOptions != nil && q.StreamOptions.IncludeUsage
	r.MaxTokens = max(q.MaxTokens, q.MaxCompletionTokens)
	var system []string
	for _, m := range q.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			return err
		}
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, text)
			continue
		}
		cm := core.ChatMessage{Role: core.Role(m.Role), Content: text, ToolCallID: m.ToolCallID}
		if cm.Attachments, err = imageParts(m.Content); err != nil {
			return err
		}
		for _, c := range m.ToolCalls {
			p, a := splitName(c.Function.Name)
			cm.ToolCalls = append(cm.ToolCalls, core.ToolCall{ID: c.ID, Plugin: p, Action: a, Args: argsText(json.RawMessage(c.Function.Arguments))})
		}
		r.Messages = append(r.Messages, cm)
	}
	r.System = strings.Join(system, "\n\n")
	for _, t := range q.Tools {
		r.Tools = append(r.Tools, toolSpec(t.Function.Name, t.Function.Description, t.Function.Parameters))
	}
	return nil
}

// toolSpec decodes a wire tool back into a core.ToolSpec.
func toolSpec(name, desc string, schema json.RawMessage) core.ToolSpec {
	p, a := splitName(name)
	spec := core.ToolSpec{Plugin: p, Action: a, Description: desc}
	var sc struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &sc)
	req := map[string]bool{}
	for _, n := range sc.Required {
		req[n] = true
	}
	for n, pr := range sc.Properties {
		spec.Params = append(spec.Params, core.ToolParam{Name: n, Description: pr.Description, Type: pr.Type, Required: req[n]})
	}
	sort.Slice(spec.Params, func(i, j int) bool { return spec.Params[i].Name < spec.Params[j].Name })
	return spec
}

// OpenAIError returns an error body shaped like OpenAI's:
// {"error":{"message":..,"type":..,"param":null,"code":..}}. code may be "".
func OpenAIError(typ, code, msg string) string {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

func (openAI) errorBody(status int, msg string) string {
	typ, code := "invalid_request_error", ""
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	return OpenAIError(typ, code, msg)
}

func (openAI) finish(s *Script) string {
	switch {
	case s.StopReason != "":
		return s.StopReason
	case len(s.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func (o openAI) complete(w http.ResponseWriter, r *Received, s *Script, n int) {
	if r.Audio != nil {
		writeJSON(w, map[string]any{"text": s.Text})
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	text := s.Text
	if s.Chunks != nil {
		text = strings.Join(s.Chunks, "")
	}
	if text != "" || len(s.ToolCalls) == 0 {
		msg["content"] = text
	}
	if len(s.ToolCalls) > 0 {
		var calls []map[string]any
		for i, c := range s.ToolCalls {
			calls = append(calls, map[string]any{
				"id": callID(c, "call_", n, i), "type": "function",
				"function": map[string]any{"name": toolName(c), "arguments": args(s, i)},
			})
		}
		msg["tool_calls"] = calls
	}
	u := usage(r, s, text)
	writeJSON(w, map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1700000000,
		"model":   model(r, s),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": o.finish(s), "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens},
	})
}

func (o openAI) stream(ctx context.Context, w http.ResponseWriter, r *Received, s *Script, n int) {
	id, mdl := fmt.Sprintf("chatcmpl-%d", n), model(r, s)
	send := func(choices []any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": mdl, "choices": choices}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		flush(w)
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}
	}
	send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	var text strings.Builder
	for i, c := range chunks(s) {
		if i > 0 && !pause(ctx, s.ChunkDelay) {
			return
		}
		text.WriteString(c)
		send(delta(map[string]any{"content": c}, nil), nil)
	}
	for i, c := range s.ToolCalls {
		for j, part := range splitArgs(args(s, i)) {
			tc := map[string]any{"index": i, "function": map[string]any{"arguments": part}}
			if j == 0 {
				tc["id"], tc["type"] = callID(c, "call_", n, i), "function"
				tc["function"].(map[string]any)["name"] = toolName(c)
			}
			send(delta(map[string]any{"tool_calls": []any{tc}}, nil), nil)
		}
	}
	send(delta(map[string]any{}, o.finish(s)), nil)
	if r.IncludeUsage {
		u := usage(r, s, text.String())
		send([]any{}, map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	flush(w)
}

func callID(c core.ToolCall, prefix string, n, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("%s%d_%d", prefix, n, i)
}

func model(r *Received, s *Script) string {
	if s.Model != "" {
		return s.Model
	}
	return r.Model
}
