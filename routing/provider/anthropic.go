package provider

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Anthropic wire constants.
const (
	AnthropicDefaultBaseURL = "https://api.anthropic.com"
	anthropicVersion        = "2023-06-01"
	anthropicOAuthBeta      = "oauth-2025-04-20"
	// AnthropicDefaultMaxTokens is the answer cap sent when neither the
	// request nor Options set one (the API requires max_tokens).
	AnthropicDefaultMaxTokens = 4096
)

// Anthropic speaks the Messages API (POST {base}/v1/messages).
type Anthropic struct {
	c client
	// tools is the encoding of the last tool list sent.
	tools toolsCache
}

var _ Provider = (*Anthropic)(nil)

// NewAnthropic returns a Messages API provider. An API key is sent as
// x-api-key, an OAuth credential as "Authorization: Bearer" (with the
// OAuth beta header), always with anthropic-version 2023-06-01.
func NewAnthropic(o Options) *Anthropic {
	if o.MaxTokens <= 0 {
		o.MaxTokens = AnthropicDefaultMaxTokens
	}
	c := newClient(o, "anthropic", AnthropicDefaultBaseURL)
	c.base = AnthropicBase(c.base)
	return &Anthropic{c: c}
}

// AnthropicBase is the server of an Anthropic base_url ("" = the
// default), under which the API's paths start with /v1: a base_url
// written the OpenAI way, with the /v1, means the same server.
func AnthropicBase(baseURL string) string {
	if baseURL == "" {
		baseURL = AnthropicDefaultBaseURL
	}
	base, query, ok := strings.Cut(baseURL, "?")
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
	if ok {
		return base + "?" + query
	}
	return base
}

// ID returns the provider id.
func (p *Anthropic) ID() string { return p.c.id }

// Wire types of the request.
type (
	anRequest struct {
		Model       string          `json:"model"`
		MaxTokens   int             `json:"max_tokens"`
		System      string          `json:"system,omitempty"`
		Messages    []anMessage     `json:"messages"`
		Tools       json.RawMessage `json:"tools,omitempty"` // []anTool, encoded (toolsCache)
		Temperature *float64        `json:"temperature,omitempty"`
		Stream      bool            `json:"stream,omitempty"`
	}
	anMessage struct {
		Role    string    `json:"role"`
		Content []anBlock `json:"content"`
	}
	// anBlock is any content block; each type uses its own fields.
	anBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`        // text
		ID        string          `json:"id,omitempty"`          // tool_use
		Name      string          `json:"name,omitempty"`        // tool_use
		Input     json.RawMessage `json:"input,omitempty"`       // tool_use
		ToolUseID string          `json:"tool_use_id,omitempty"` // tool_result
		Content   string          `json:"content,omitempty"`     // tool_result
		Source    *anSource       `json:"source,omitempty"`      // image
	}
	// anSource is an image block's inline data.
	anSource struct {
		Type      string `json:"type"` // "base64"
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	anTool struct {
		Name        string     `json:"name"`
		Description string     `json:"description,omitempty"`
		InputSchema jsonSchema `json:"input_schema"`
	}
)

// Wire types of the answer.
type (
	anResponse struct {
		Type       string          `json:"type"`
		Model      string          `json:"model"`
		Content    []anAnswerBlock `json:"content"`
		StopReason string          `json:"stop_reason"`
		Usage      anUsage         `json:"usage"`
	}
	anAnswerBlock struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anUsage struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	}
	anEvent struct {
		Type         string        `json:"type"`
		Index        int           `json:"index"`
		Message      *anResponse   `json:"message"`
		ContentBlock anAnswerBlock `json:"content_block"`
		Delta        struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *anUsage `json:"usage"`
	}
)

// input is all the input tokens: fresh, written to and read from cache.
func (u anUsage) input() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

func (p *Anthropic) request(req *Request, stream bool) (*anRequest, error) {
	w := &anRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: stream,
		Messages: make([]anMessage, 0, len(req.Messages))}
	if w.MaxTokens <= 0 {
		w.MaxTokens = p.c.maxTokens
	}
	system := []string{}
	if req.System != "" {
		system = append(system, req.System)
	}
	mergeable := false // the last wire message holds only tool results
	// The API refuses tool_use and tool_result blocks in a request that
	// offers no tools (an answer asked for without tools after a loop of
	// calls, a model without the tools capability reading a history with
	// calls): they are then written as text.
	flat := len(req.Tools) == 0
	names := map[string]string{} // tool call id → tool name, for flat results
	for _, m := range req.Messages {
		switch m.Role {
		case core.RoleSystem:
			if m.Content != "" {
				system = append(system, m.Content)
			}
		case core.RoleTool:
			b := anBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content}
			if flat {
				b = anBlock{Type: "text", Text: fmt.Sprintf("(The result of the tool call %s:)\n%s", cmp.Or(names[m.ToolCallID], m.ToolCallID), m.Content)}
			}
			if mergeable {
				last := &w.Messages[len(w.Messages)-1]
				last.Content = append(last.Content, b)
			} else {
				w.Messages = append(w.Messages, anMessage{Role: "user", Content: []anBlock{b}})
				mergeable = true
			}
		case core.RoleAssistant:
			var bs []anBlock
			if m.Content != "" {
				bs = append(bs, anBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				name := ToolName(c.Plugin, c.Action)
				if flat {
					names[c.ID] = name
					bs = append(bs, anBlock{Type: "text", Text: fmt.Sprintf("(I called the tool %s with %s.)", name, encodeArgs(c.Args))})
					continue
				}
				bs = append(bs, anBlock{Type: "tool_use", ID: c.ID, Name: name, Input: encodeArgs(c.Args)})
			}
			if len(bs) > 0 {
				w.Messages = append(w.Messages, anMessage{Role: "assistant", Content: bs})
				mergeable = false
			}
		default:
			var bs []anBlock
			for _, a := range images(m) {
				bs = append(bs, anBlock{Type: "image", Source: &anSource{Type: "base64", MediaType: a.MIME, Data: base64.StdEncoding.EncodeToString(a.Data)}})
			}
			if text := withPlaceholders(m); text != "" {
				bs = append(bs, anBlock{Type: "text", Text: text})
			}
			if len(bs) > 0 {
				w.Messages = append(w.Messages, anMessage{Role: string(m.Role), Content: bs})
				mergeable = false
			}
		}
	}
	w.System = strings.Join(system, "\n\n")
	if len(req.Tools) > 0 {
		var err error
		if w.Tools, err = p.tools.encoded(req.Tools, anTools); err != nil {
			return nil, fmt.Errorf("provider %s: encoding request: %w", p.c.id, err)
		}
	}
	return w, nil
}

// anTools is tools on the wire.
func anTools(tools []core.ToolSpec) any {
	w := make([]anTool, 0, len(tools))
	for _, t := range tools {
		w = append(w, anTool{Name: ToolName(t.Plugin, t.Action), Description: t.Description, InputSchema: toolSchema(t)})
	}
	return w
}

func (p *Anthropic) post(ctx context.Context, cred Credentials, w *anRequest) (*call, error) {
	defaults := map[string]string{"anthropic-version": anthropicVersion}
	if cred.OAuth {
		defaults["anthropic-beta"] = anthropicOAuthBeta
	}
	return p.c.post(ctx, "/v1/messages", w, cred.APIKey, defaults, func(h http.Header) {
		switch {
		case cred.APIKey == "":
		case cred.OAuth:
			h.Set("Authorization", "Bearer "+cred.APIKey)
		default:
			h.Set("x-api-key", cred.APIKey)
		}
	})
}

// Complete sends req and waits for the whole answer.
func (p *Anthropic) Complete(ctx context.Context, cred Credentials, req *Request) (*Response, error) {
	w, err := p.request(req, false)
	if err != nil {
		return nil, err
	}
	cl, err := p.post(ctx, cred, w)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	return p.c.complete(ctx, cl, req.Model, cred.APIKey, p.parseComplete, p.readStream)
}

func (p *Anthropic) parseComplete(body []byte, secret string) (*Response, error) {
	var wr anResponse
	if err := json.Unmarshal(body, &wr); err != nil {
		return nil, malformed(p.c.id, "answer is not JSON", err, secret)
	}
	switch {
	case wr.Type == "error":
		return nil, streamError(p.c.id, parseAPIError(body), secret)
	case wr.Type != "message" && wr.Content == nil:
		return nil, malformed(p.c.id, "answer is not a message", nil, secret)
	}
	r := &Response{Model: wr.Model, StopReason: anStop(wr.StopReason),
		Usage: core.Usage{InputTokens: wr.Usage.input(), OutputTokens: wr.Usage.OutputTokens}}
	var text strings.Builder
	for _, b := range wr.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			tc, err := toolCall(b.ID, b.Name, b.Input)
			if err != nil {
				return nil, malformed(p.c.id, "tool call", err, secret)
			}
			r.ToolCalls = append(r.ToolCalls, tc)
		}
	}
	r.Text = text.String()
	return r, nil
}

// anStop normalizes a stop_reason.
func anStop(s string) string {
	switch s {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		// The second: the answer filled the context window, cut as at
		// max_tokens.
		return "length"
	}
	return s
}

// Stream sends req with streaming on, calls onText with each text delta,
// and returns the assembled answer with usage from message_start and
// message_delta.
func (p *Anthropic) Stream(ctx context.Context, cred Credentials, req *Request, onText func(delta string)) (*Response, error) {
	w, err := p.request(req, true)
	if err != nil {
		return nil, err
	}
	cl, err := p.post(ctx, cred, w)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	return p.c.stream(ctx, cl, req.Model, cred.APIKey, onText, p.parseComplete, p.readStream)
}

func (p *Anthropic) readStream(cl *call, onText func(string), secret string) (*Response, error) {
	sse := newChunkReader(cl.resp.Body)
	r := &Response{}
	var text strings.Builder
	calls := map[int]*pendingCall{}
	started := false
	finish := func() (*Response, error) { return streamed(r, &text, calls, p.c.id, secret) }
	for {
		ev, err := sse.Next()
		if err == io.EOF {
			// A server that ends the stream after the message_delta
			// carrying the stop reason, without message_stop, has said
			// all it will (as a chat completions stream may end at its
			// finish_reason without [DONE]).
			if started && r.StopReason != "" {
				return finish()
			}
			return nil, malformed(p.c.id, "event stream ended before message_stop", nil, secret)
		}
		if err != nil {
			if tooLong(err) {
				return nil, malformed(p.c.id, "bad event stream", err, secret)
			}
			return nil, p.c.readErr(cl, err, secret)
		}
		var e anEvent
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return nil, malformed(p.c.id, "bad stream event "+ev.Event, err, secret)
		}
		switch e.Type {
		case "error":
			return nil, streamError(p.c.id, parseAPIError([]byte(ev.Data)), secret)
		case "message_start":
			if e.Message == nil {
				return nil, malformed(p.c.id, "message_start without message", nil, secret)
			}
			started = true
			r.Model = e.Message.Model
			r.Usage = core.Usage{InputTokens: e.Message.Usage.input(), OutputTokens: e.Message.Usage.OutputTokens}
		case "content_block_start":
			if e.ContentBlock.Type == "tool_use" {
				calls[e.Index] = &pendingCall{id: e.ContentBlock.ID, name: e.ContentBlock.Name}
			}
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				if e.Delta.Text != "" {
					text.WriteString(e.Delta.Text)
					onText(e.Delta.Text)
				}
			case "input_json_delta":
				pc := calls[e.Index]
				if pc == nil {
					return nil, malformed(p.c.id, "input_json_delta for a block that is not a tool_use", nil, secret)
				}
				pc.args.WriteString(e.Delta.PartialJSON)
			}
		case "message_delta":
			if e.Delta.StopReason != "" {
				r.StopReason = anStop(e.Delta.StopReason)
			}
			if e.Usage != nil {
				r.Usage.OutputTokens = e.Usage.OutputTokens
				if in := e.Usage.input(); in > 0 {
					r.Usage.InputTokens = in
				}
			}
		case "message_stop":
			if !started {
				return nil, malformed(p.c.id, "message_stop before message_start", nil, secret)
			}
			return finish()
		}
	}
}
