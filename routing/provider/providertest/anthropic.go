package providertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// anthropic speaks the Messages wire format.
type anthropic struct{}

func (anthropic) paths() []string  { return []string{"/v1/messages"} }
func (anthropic) basePath() string { return "" }

type anRequest struct {
	Model       string          `json:"model"`
	System      json.RawMessage `json:"system"` // string or text blocks
	Messages    []anMessage     `json:"messages"`
	Tools       []anTool        `json:"tools"`
	Stream      bool            `json:"stream"`
	MaxTokens   int             `json:"max_tokens"`
	Temperature *float64        `json:"temperature"`
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // string or blocks
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: string or blocks
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"` // image
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func blocks(raw json.RawMessage) ([]anBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("content is neither a string nor an array of blocks: %w", err)
	}
	return bs, nil
}

func (anthropic) decode(r *Received) error {
	var q anRequest
	if err := json.Unmarshal(r.Body, &q); err != nil {
		return err
	}
	if q.MaxTokens <= 0 {
		return fmt.Errorf("max_tokens: field required")
	}
	r.Model, r.Stream, r.MaxTokens, r.Temperature = q.Model, q.Stream, q.MaxTokens, q.Temperature
	sys, err := blocks(q.System)
	if err != nil {
		return fmt.Errorf("system: %w", err)
	}
	var parts []string
	for _, b := range sys {
		parts = append(parts, b.Text)
	}
	r.System = strings.Join(parts, "\n\n")
	for _, m := range q.Messages {
		bs, err := blocks(m.Content)
		if err != nil {
			return err
		}
		cm := core.ChatMessage{Role: core.Role(m.Role)}
		var text []string
		for _, b := range bs {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_use":
				p, a := splitName(b.Name)
				cm.ToolCalls = append(cm.ToolCalls, core.ToolCall{ID: b.ID, Plugin: p, Action: a, Args: argsText(b.Input)})
			case "image":
				if b.Source == nil || b.Source.Type != "base64" {
					return fmt.Errorf("image: source must be {type: base64, media_type, data}")
				}
				if n := len(b.Source.Data); n > 5<<20 {
					// As Anthropic refuses it (the base64 text's size).
					return fmt.Errorf("image exceeds 5 MB maximum: %d bytes > %d bytes", n, 5<<20)
				}
				data, err := base64.StdEncoding.DecodeString(b.Source.Data)
				if err != nil {
					return fmt.Errorf("image: source.data: %w", err)
				}
				cm.Attachments = append(cm.Attachments, core.Attachment{Kind: core.MediaImage, MIME: b.Source.MediaType, Size: int64(len(data)), Data: data})
			case "tool_result":
				rb, err := blocks(b.Content)
				if err != nil {
					return fmt.Errorf("tool_result: %w", err)
				}
				var rt strings.Builder
				for _, x := range rb {
					rt.WriteString(x.Text)
				}
				r.Messages = append(r.Messages, core.ChatMessage{Role: core.RoleTool, Content: rt.String(), ToolCallID: b.ToolUseID})
			}
		}
		cm.Content = strings.Join(text, "")
		if cm.Content != "" || len(cm.ToolCalls) > 0 || len(cm.Attachments) > 0 {
			r.Messages = append(r.Messages, cm)
		}
	}
	for _, t := range q.Tools {
		r.Tools = append(r.Tools, toolSpec(t.Name, t.Description, t.InputSchema))
	}
	// As the API: tool blocks need tools defined.
	if len(q.Tools) == 0 {
		for _, m := range r.Messages {
			if m.Role == core.RoleTool || len(m.ToolCalls) > 0 {
				return fmt.Errorf("requests which include tool_use or tool_result blocks must define tools")
			}
		}
	}
	return nil
}

// AnthropicError returns an error body shaped like Anthropic's:
// {"type":"error","error":{"type":..,"message":..}}.
func AnthropicError(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	return string(b)
}

func (anthropic) errorBody(status int, msg string) string {
	typ := "invalid_request_error"
	switch status {
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case 529:
		typ = "overloaded_error"
	default:
		if status >= 500 {
			typ = "api_error"
		}
	}
	return AnthropicError(typ, msg)
}

func (anthropic) stop(s *Script) string {
	switch {
	case s.StopReason != "":
		return s.StopReason
	case len(s.ToolCalls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

func (a anthropic) complete(w http.ResponseWriter, r *Received, s *Script, n int) {
	text := s.Text
	if s.Chunks != nil {
		text = strings.Join(s.Chunks, "")
	}
	content := []any{}
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for i, c := range s.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": callID(c, "toolu_", n, i), "name": toolName(c), "input": json.RawMessage(args(s, i))})
	}
	u := usage(r, s, text)
	writeJSON(w, map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": model(r, s),
		"content": content, "stop_reason": a.stop(s), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens},
	})
}

func (a anthropic) stream(ctx context.Context, w http.ResponseWriter, r *Received, s *Script, n int) {
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		flush(w)
	}
	var text strings.Builder
	for _, c := range chunks(s) {
		text.WriteString(c)
	}
	u := usage(r, s, text.String())
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "content": []any{},
		"model": model(r, s), "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": 1},
	}})
	idx := 0
	if cs := chunks(s); len(cs) > 0 {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		send("ping", map[string]any{"type": "ping"})
		for i, c := range cs {
			if i > 0 && !pause(ctx, s.ChunkDelay) {
				return
			}
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": c}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for i, c := range s.ToolCalls {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": callID(c, "toolu_", n, i), "name": toolName(c), "input": map[string]any{}}})
		for _, part := range splitArgs(args(s, i)) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": a.stop(s), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.OutputTokens}})
	send("message_stop", map[string]any{"type": "message_stop"})
}
