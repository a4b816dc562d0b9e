package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// OpenAIDefaultBaseURL is where api: openai-completions goes without a
// base_url.
const OpenAIDefaultBaseURL = "https://api.openai.com/v1"

// OpenAI speaks the Chat Completions API (POST {base}/chat/completions):
// OpenAI itself and any compatible server (Ollama, vLLM, llama.cpp, …).
type OpenAI struct {
	c client
	// completionTokensField is the wire name of the answer cap: OpenAI's
	// own API wants max_completion_tokens (newer models refuse
	// max_tokens); compatible servers know max_tokens.
	completionTokensField bool
	// tools is the encoding of the last tool list sent.
	tools toolsCache
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns a Chat Completions provider. A key is sent as
// "Authorization: Bearer"; with no key nothing is sent, for keyless local
// servers.
func NewOpenAI(o Options) *OpenAI {
	p := &OpenAI{c: newClient(o, "openai", OpenAIDefaultBaseURL)}
	if u, err := url.Parse(p.c.base); err == nil && u.Hostname() == "api.openai.com" {
		p.completionTokensField = true
	}
	return p
}

// ID returns the provider id.
func (p *OpenAI) ID() string { return p.c.id }

// Wire types of the request.
type (
	oaRequest struct {
		Model               string           `json:"model"`
		Messages            []oaMessage      `json:"messages"`
		Tools               json.RawMessage  `json:"tools,omitempty"` // []oaTool, encoded (toolsCache)
		MaxTokens           int              `json:"max_tokens,omitempty"`
		MaxCompletionTokens int              `json:"max_completion_tokens,omitempty"`
		Temperature         *float64         `json:"temperature,omitempty"`
		Stream              bool             `json:"stream,omitempty"`
		StreamOptions       *oaStreamOptions `json:"stream_options,omitempty"`
	}
	oaStreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	oaMessage struct {
		Role string `json:"role"`
		// Content is a *string (null on a tool-call-only assistant turn)
		// or, for a user message with images, []oaPart.
		Content    any          `json:"content"`
		ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
		ToolCallID string       `json:"tool_call_id,omitempty"`
	}
	// oaPart is one part of a user message: text or an image.
	oaPart struct {
		Type     string      `json:"type"`
		Text     string      `json:"text,omitempty"`
		ImageURL *oaImageURL `json:"image_url,omitempty"`
	}
	oaImageURL struct {
		URL string `json:"url"`
	}
	oaToolCall struct {
		Index    *int       `json:"index,omitempty"` // in stream deltas only
		ID       string     `json:"id,omitempty"`
		Type     string     `json:"type,omitempty"`
		Function oaFunction `json:"function"`
	}
	oaFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments oaArgs `json:"arguments"`
	}
	oaTool struct {
		Type     string        `json:"type"`
		Function oaToolFuncDef `json:"function"`
	}
	oaToolFuncDef struct {
		Name        string     `json:"name"`
		Description string     `json:"description,omitempty"`
		Parameters  jsonSchema `json:"parameters"`
	}
)

// Wire types of the answer.
type (
	oaResponse struct {
		Model   string          `json:"model"`
		Choices []oaChoice      `json:"choices"`
		Usage   *oaUsage        `json:"usage"`
		Error   json.RawMessage `json:"error"`
	}
	oaChoice struct {
		Message      oaAnswerMessage `json:"message"`
		Delta        oaAnswerMessage `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
	}
	oaAnswerMessage struct {
		Content   json.RawMessage `json:"content"` // string, null or parts
		ToolCalls []oaToolCall    `json:"tool_calls"`
	}
	oaUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
)

func strPtr(s string) *string { return &s }

func (p *OpenAI) request(req *Request, stream bool) (*oaRequest, error) {
	w := &oaRequest{Model: req.Model, Temperature: req.Temperature, Messages: make([]oaMessage, 0, len(req.Messages)+1)}
	if mt := req.MaxTokens; mt > 0 || p.c.maxTokens > 0 {
		if mt <= 0 {
			mt = p.c.maxTokens
		}
		if p.completionTokensField {
			w.MaxCompletionTokens = mt
		} else {
			w.MaxTokens = mt
		}
	}
	if stream {
		w.Stream, w.StreamOptions = true, &oaStreamOptions{IncludeUsage: true}
	}
	if req.System != "" {
		w.Messages = append(w.Messages, oaMessage{Role: "system", Content: strPtr(req.System)})
	}
	for _, m := range req.Messages {
		om := oaMessage{Role: string(m.Role), Content: strPtr(withPlaceholders(m)), ToolCallID: m.ToolCallID}
		if imgs := images(m); len(imgs) > 0 {
			var parts []oaPart
			if text := withPlaceholders(m); text != "" {
				// (A photo without a caption is the image alone: a text
				// part must have text.)
				parts = append(parts, oaPart{Type: "text", Text: text})
			}
			for _, a := range imgs {
				parts = append(parts, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: dataURL(a)}})
			}
			om.Content = parts
		}
		if m.Role == core.RoleAssistant && len(m.ToolCalls) > 0 {
			if m.Content == "" {
				om.Content = nil
			}
			for _, c := range m.ToolCalls {
				om.ToolCalls = append(om.ToolCalls, oaToolCall{ID: c.ID, Type: "function",
					Function: oaFunction{Name: ToolName(c.Plugin, c.Action), Arguments: oaArgs(encodeArgs(c.Args))}})
			}
		}
		w.Messages = append(w.Messages, om)
	}
	if len(req.Tools) > 0 {
		var err error
		if w.Tools, err = p.tools.encoded(req.Tools, oaTools); err != nil {
			return nil, fmt.Errorf("provider %s: encoding request: %w", p.c.id, err)
		}
	}
	return w, nil
}

// oaTools is tools on the wire.
func oaTools(tools []core.ToolSpec) any {
	w := make([]oaTool, 0, len(tools))
	for _, t := range tools {
		w = append(w, oaTool{Type: "function", Function: oaToolFuncDef{
			Name: ToolName(t.Plugin, t.Action), Description: t.Description, Parameters: toolSchema(t)}})
	}
	return w
}

func (p *OpenAI) post(ctx context.Context, cred Credentials, w *oaRequest) (*call, error) {
	return p.c.post(ctx, "/chat/completions", w, cred.APIKey, nil, func(h http.Header) {
		if cred.APIKey != "" {
			h.Set("Authorization", "Bearer "+cred.APIKey)
		}
	})
}

// Complete sends req and waits for the whole answer.
func (p *OpenAI) Complete(ctx context.Context, cred Credentials, req *Request) (*Response, error) {
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

func (p *OpenAI) parseComplete(body []byte, secret string) (*Response, error) {
	var wr oaResponse
	if err := json.Unmarshal(body, &wr); err != nil {
		return nil, malformed(p.c.id, "answer is not JSON", err, secret)
	}
	if len(wr.Error) > 0 && string(wr.Error) != "null" {
		return nil, streamError(p.c.id, parseAPIError(body), secret)
	}
	if len(wr.Choices) == 0 {
		return nil, malformed(p.c.id, "answer has no choices", nil, secret)
	}
	ch := wr.Choices[0]
	text, err := contentText(ch.Message.Content)
	if err != nil {
		return nil, malformed(p.c.id, "message content", err, secret)
	}
	r := &Response{Text: text, Model: wr.Model}
	if ch.FinishReason != nil {
		r.StopReason = oaStop(*ch.FinishReason)
	}
	if wr.Usage != nil {
		r.Usage = core.Usage{InputTokens: wr.Usage.PromptTokens, OutputTokens: wr.Usage.CompletionTokens}
	}
	for _, c := range ch.Message.ToolCalls {
		tc, err := toolCall(c.ID, c.Function.Name, []byte(c.Function.Arguments))
		if err != nil {
			return nil, malformed(p.c.id, "tool call", err, secret)
		}
		r.ToolCalls = append(r.ToolCalls, tc)
	}
	return r, nil
}

// contentText reads a message content that is a string, null, or an array
// of {"type":"text","text":…} parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := plainJSONString(raw); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content is neither a string nor an array of parts")
	}
	var b strings.Builder
	for _, pt := range parts {
		b.WriteString(pt.Text)
	}
	return b.String(), nil
}

// plainJSONString reads raw, a JSON value the decoder already found
// valid, without a decoder when it is a string that needs no decoding
// (no escape, valid UTF-8): what json.Unmarshal would give, without its
// decoder state, for most stream deltas.
func plainJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		// A quote inside can only be escaped (valid JSON); control
		// characters cannot be there at all, but are left to the decoder.
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false // the decoder replaces invalid bytes with U+FFFD
	}
	return string(body), true
}

// oaStop normalizes a finish_reason.
func oaStop(s string) string {
	if s == "function_call" {
		return "tool_calls"
	}
	return s
}

// Stream sends req with streaming on, calls onText with each text delta,
// and returns the assembled answer, usage included (stream_options).
func (p *OpenAI) Stream(ctx context.Context, cred Credentials, req *Request, onText func(delta string)) (*Response, error) {
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

// oaArgs is a tool call's arguments: the API sends them as a string of
// JSON; some compatible servers send the JSON object itself, which is
// kept as its text (null as none).
type oaArgs string

func (a *oaArgs) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = oaArgs(s)
		return nil
	}
	if t := bytes.TrimSpace(b); string(t) != "null" {
		*a = oaArgs(t)
	} else {
		*a = ""
	}
	return nil
}

// readStream reads a chat completions stream: the text deltas (each
// passed to onText), the tool calls assembled from their pieces, the
// finish reason and the usage chunk.
func (p *OpenAI) readStream(cl *call, onText func(string), secret string) (*Response, error) {
	sse := newChunkReader(cl.resp.Body)
	r := &Response{}
	var text strings.Builder
	calls := map[int]*pendingCall{}
	last := 0
	done, finished, seen := false, false, false
	for !done {
		ev, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if tooLong(err) {
				return nil, malformed(p.c.id, "bad event stream", err, secret)
			}
			return nil, p.c.readErr(cl, err, secret)
		}
		data := ev.Data
		if strings.TrimSpace(data) == "[DONE]" {
			done = true
			break
		}
		var ch oaResponse
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return nil, malformed(p.c.id, "bad stream chunk", err, secret)
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return nil, streamError(p.c.id, parseAPIError([]byte(data)), secret)
		}
		seen = true
		if ch.Model != "" {
			r.Model = ch.Model
		}
		if ch.Usage != nil {
			r.Usage = core.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
		}
		if len(ch.Choices) == 0 {
			continue
		}
		c := ch.Choices[0]
		delta, err := contentText(c.Delta.Content)
		if err != nil {
			return nil, malformed(p.c.id, "bad stream delta", err, secret)
		}
		if delta != "" {
			text.WriteString(delta)
			onText(delta)
		}
		for _, d := range c.Delta.ToolCalls {
			// Deltas carry an index; servers that omit it send whole calls,
			// so a new id starts a new call and anything else continues
			// the last one.
			idx := last
			switch {
			case d.Index != nil:
				idx = *d.Index
			case d.ID != "" || len(calls) == 0:
				idx = len(calls)
			}
			last = idx
			pc := calls[idx]
			if pc == nil {
				pc = &pendingCall{}
				calls[idx] = pc
			}
			if d.ID != "" {
				pc.id = d.ID
			}
			if d.Function.Name != "" {
				if len(pc.name)+len(d.Function.Name) > maxToolName {
					return nil, malformed(p.c.id, fmt.Sprintf("a tool call's name is longer than %d bytes", maxToolName), nil, secret)
				}
				pc.name += d.Function.Name
			}
			pc.args.WriteString(string(d.Function.Arguments))
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			r.StopReason, finished = oaStop(*c.FinishReason), true
		}
	}
	if !done && !finished {
		return nil, malformed(p.c.id, "event stream ended before [DONE]", nil, secret)
	}
	if !seen {
		return nil, malformed(p.c.id, "event stream had no chunks", nil, secret)
	}
	return streamed(r, &text, calls, p.c.id, secret)
}
