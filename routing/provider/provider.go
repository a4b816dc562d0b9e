package provider

import (
	"context"
	"log/slog"

	"github.com/opentalon/opentalon/core"
)

// Request is one LLM call in the gateway's terms; each provider maps it
// onto its wire format.
type Request struct {
	// Model is the provider's own model id (without the "provider/" prefix).
	Model    string
	System   string
	Messages []core.ChatMessage
	Tools    []core.ToolSpec
	// MaxTokens caps the answer (0 = provider default; Anthropic needs one,
	// so its provider fills in a default).
	MaxTokens   int
	Temperature *float64
}

// Response is a finished LLM answer.
type Response struct {
	Text      string
	ToolCalls []core.ToolCall
	Usage     core.Usage
	// Model is the model id the provider reports having used.
	Model string
	// StopReason is the provider's finish reason, normalized to "stop",
	// "tool_calls", "length" or the provider's own word.
	StopReason string
}

// Credentials are what one auth profile presents to a provider.
type Credentials struct {
	APIKey string
	// OAuth marks a bearer token rather than an API key (Anthropic sends
	// them differently).
	OAuth bool
}

// Provider talks to one LLM API. Implementations are safe for concurrent
// use; errors are *core.Error with a Kind that failover decides on.
type Provider interface {
	ID() string
	// Complete sends req and waits for the whole answer.
	Complete(ctx context.Context, cred Credentials, req *Request) (*Response, error)
	// Stream sends req with streaming on, calls onText with each text
	// delta as it arrives, and returns the assembled answer.
	Stream(ctx context.Context, cred Credentials, req *Request, onText func(delta string)) (*Response, error)
}

// String redacts the key so a Credentials never prints it.
func (c Credentials) String() string {
	if c.APIKey == "" {
		return "credentials(none)"
	}
	return "credentials([redacted])"
}

// GoString redacts the key for %#v as well.
func (c Credentials) GoString() string { return c.String() }

// LogValue redacts the key in structured logs.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("key_set", c.APIKey != ""), slog.Bool("oauth", c.OAuth))
}
