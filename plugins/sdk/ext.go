package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	pluginpb "github.com/opentalon/opentalon/proto"
)

// Hook declares a request ("pre") or response ("post") hook; the plugin
// implements PreHooker or PostHooker to match.
type Hook struct {
	Stage string
	// Order places it among every hook, Lua scripts included (a Lua
	// script's order is the number its file name starts with).
	Order int
	// Timeout asks for a shorter per-call timeout than the core's
	// plugins.tools.hooks.timeout (0 = that).
	Timeout time.Duration
	// StreamUnsafe marks a post hook that must see the whole answer
	// before the user sees any of it (a redaction hook): while it is
	// loaded, answers are sent only once the post hooks ran, not streamed.
	StreamUnsafe bool
}

// Hook stages.
const (
	StagePre  = "pre"
	StagePost = "post"
)

// Route declares an HTTP route the core serves under
// /api/plugins/<name>/<Path>; the plugin implements http.Handler.
type Route struct {
	// Method is GET, POST, … ("" = any).
	Method string
	// Path is below /api/plugins/<name>/ (no leading slash); ending in
	// "/" it also matches everything below it.
	Path string
	// Public serves the route without the core's API key: the handler
	// must verify each request itself (VerifyHMAC).
	Public bool
}

// Schedule declares a schedule; the plugin implements Scheduler and is
// called when it fires.
type Schedule struct {
	ID       string
	Interval string // a Go duration such as "6h", or
	Cron     string // five cron fields
	// Channel, Chat and Thread are where what OnSchedule returns goes.
	Channel, Chat, Thread string
	// Timezone is an IANA name ("" = the core's timezone); Missed is
	// "skip" (default) or "once".
	Timezone, Missed string
}

// HookRequest is what a hook sees.
type HookRequest struct {
	// Text is the message (PreHook) or the answer (PostHook).
	Text     string
	Metadata map[string]string
	Channel  string
	Chat     string
	Thread   string
	UserID   string
	UserName string
	// SessionID is the conversation's session; Question is, for
	// PostHook, the text the LLM answered.
	SessionID int64
	Question  string
}

// HookResult is a hook's decision; the zero value changes nothing.
type HookResult struct {
	// Text replaces the message or answer ("" = unchanged).
	Text string
	// Metadata is added to the message's metadata.
	Metadata map[string]string
	// Drop stops the message (pre only), Reason says why; Reply answers
	// it without the LLM (pre only).
	Drop   bool
	Reason string
	Reply  string
}

// PreHooker runs before the LLM on each message (declare a "pre" Hook).
type PreHooker interface {
	PreHook(ctx context.Context, r HookRequest) (HookResult, error)
}

// PostHooker runs after the LLM on each answer (declare a "post" Hook).
type PostHooker interface {
	PostHook(ctx context.Context, r HookRequest) (HookResult, error)
}

// Firing is one firing of a declared schedule.
type Firing struct {
	ID                    string
	At                    time.Time
	Channel, Chat, Thread string
}

// ScheduleResult says what to post: Text as it is, or the LLM's answer
// to Prompt; Skip posts nothing.
type ScheduleResult struct {
	Text   string
	Prompt string
	Skip   bool
}

// Scheduler is called when a declared schedule fires.
type Scheduler interface {
	OnSchedule(ctx context.Context, f Firing) (ScheduleResult, error)
}

// Notification is an operator event (kind request_failed, channel_down,
// provider_cooling, budget_warning, budget_exhausted,
// plugin_restart_loop, lua_hook_failed).
type Notification struct {
	Kind, Subject, Message string
	At                     time.Time
	Details                map[string]string
	// Suppressed counts the events of this kind held back since the
	// last one sent.
	Suppressed int
}

// Notifier is a notification sink (the core's notifications.sinks with
// type: plugin).
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// Decision is an auth provider's answer.
type Decision int

// Decisions; the zero value denies.
const (
	Deny Decision = iota
	Allow
	// Admin allows and makes the user an admin of the channel.
	Admin
)

// AuthRequest names the user to decide on.
type AuthRequest struct {
	Channel, Chat, UserID, UserName string
}

// Authorizer is an auth provider (plugins.auth.plugin): the core asks it
// about each user the channel's own access rule admitted.
type Authorizer interface {
	Authorize(ctx context.Context, r AuthRequest) (Decision, error)
}

// BlobStore stores the files the gateway keeps (plugins.blobs.plugin).
// Keys are paths of letters, digits, '.', '-', '_' and '/'.
type BlobStore interface {
	PutBlob(ctx context.Context, key string, data []byte) error
	// GetBlob returns found=false for a missing key.
	GetBlob(ctx context.Context, key string) (data []byte, found bool, err error)
	// DeleteBlob removes key; a missing key is no error.
	DeleteBlob(ctx context.Context, key string) error
}

// ChatMessage is one message of the conversation sent to a provider.
type ChatMessage struct {
	// Role is system, user, assistant or tool.
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// ToolCall is the LLM's request to run one action.
type ToolCall struct {
	ID, Plugin, Action string
	Args               map[string]string
}

// ToolSpec is one tool offered to the LLM.
type ToolSpec struct {
	Plugin, Action, Description string
	Params                      []Param
}

// CompletionRequest is one LLM call.
type CompletionRequest struct {
	// Model is the provider's own model id.
	Model       string
	System      string
	Messages    []ChatMessage
	Tools       []ToolSpec
	MaxTokens   int
	Temperature *float64
	// APIKey is the auth profile's credential ("" = none configured).
	APIKey string
}

// CompletionResponse is the LLM's answer.
type CompletionResponse struct {
	Text                      string
	ToolCalls                 []ToolCall
	InputTokens, OutputTokens int
	Model                     string
	// StopReason is stop, tool_calls, length or the provider's own word.
	StopReason string
}

// Provider is an LLM provider (models.providers.<id>: { api: plugin }).
// Return a *ProviderError for failures the core's failover should judge
// (a rate limit rotates the credential, then the model).
type Provider interface {
	Complete(ctx context.Context, r CompletionRequest) (CompletionResponse, error)
}

// StreamProvider streams: it calls send with each text delta and returns
// the whole answer. A Provider without it streams its Complete answer as
// one delta.
type StreamProvider interface {
	Stream(ctx context.Context, r CompletionRequest, send func(delta string) error) (CompletionResponse, error)
}

// Provider error kinds.
const (
	KindRateLimited    = "rate_limited"
	KindAuth           = "auth"
	KindBilling        = "billing"
	KindUnavailable    = "unavailable"
	KindTimeout        = "timeout"
	KindContextTooLong = "context_too_long"
	KindBadRequest     = "bad_request"
)

// ProviderError is a provider failure of a kind.
type ProviderError struct {
	Kind       string
	Message    string
	RetryAfter time.Duration
}

func (e *ProviderError) Error() string { return e.Kind + ": " + e.Message }

// Message is a message an HTTP handler injects into a conversation.
type Message struct {
	Channel, Chat, Thread string
	Text                  string
	// UserID and UserName say on whose behalf.
	UserID, UserName string
	// ID makes it idempotent: a second message with the same ID (the
	// same webhook delivered twice) is dropped.
	ID string
}

type injectKey struct{}

type routeKey struct{}

// MatchedRoute is the declared route the core matched a request to (and
// checked the access rule of): serve the request by it, not by matching
// its path again, which may resolve differently (a trailing slash, a
// subtree). ok is false outside a request served by the core.
func MatchedRoute(r *http.Request) (route Route, ok bool) {
	route, ok = r.Context().Value(routeKey{}).(Route)
	return route, ok
}

// Inject puts a message into a conversation from an HTTP handler: the
// core commits it to its durable queue before it sends the handler's
// response, so a caller that got a 2xx knows the message is taken. The
// core queues a handler's messages only when it answers below 400 (an
// error is retried by its caller, and would queue them twice); set ID so
// a retried delivery is not queued again either. It fails outside a
// request served by the core.
func Inject(r *http.Request, m Message) error {
	list, ok := r.Context().Value(injectKey{}).(*[]Message)
	if !ok {
		return errors.New("sdk.Inject: not a request the core forwarded")
	}
	*list = append(*list, m)
	return nil
}

// checkImplements refuses a declaration without its implementation.
func checkImplements(p Plugin, c Capabilities) error {
	for _, h := range c.Hooks {
		switch h.Stage {
		case StagePre:
			if _, ok := p.(PreHooker); !ok {
				return fmt.Errorf("plugin %s declares a pre hook but does not implement PreHook", c.Name)
			}
		case StagePost:
			if _, ok := p.(PostHooker); !ok {
				return fmt.Errorf("plugin %s declares a post hook but does not implement PostHook", c.Name)
			}
		default:
			return fmt.Errorf("plugin %s: hook stage %q is not pre or post", c.Name, h.Stage)
		}
	}
	if _, ok := p.(http.Handler); len(c.Routes) > 0 && !ok {
		return fmt.Errorf("plugin %s declares routes but does not implement ServeHTTP", c.Name)
	}
	if _, ok := p.(Scheduler); len(c.Schedules) > 0 && !ok {
		return fmt.Errorf("plugin %s declares schedules but does not implement OnSchedule", c.Name)
	}
	return nil
}

// services lists the services p implements, as declared to the core.
func services(p Plugin) []string {
	var out []string
	if _, ok := p.(Notifier); ok {
		out = append(out, "notify")
	}
	if _, ok := p.(Authorizer); ok {
		out = append(out, "authorize")
	}
	if _, ok := p.(BlobStore); ok {
		out = append(out, "blobs")
	}
	if _, ok := p.(Provider); ok {
		out = append(out, "provider")
	}
	return out
}

func capabilitiesProto(p Plugin, c Capabilities) *pluginpb.PluginCapabilities {
	pc := &pluginpb.PluginCapabilities{Name: c.Name, Description: c.Description, Services: services(p)}
	for _, a := range c.Actions {
		pa := &pluginpb.Action{Name: a.Name, Description: a.Description, PostProcess: a.PostProcess, PostProcessPrompt: a.PostProcessPrompt}
		for _, prm := range a.Params {
			pa.Parameters = append(pa.Parameters, &pluginpb.Parameter{Name: prm.Name, Description: prm.Description, Type: prm.Type, Required: prm.Required})
		}
		pc.Actions = append(pc.Actions, pa)
	}
	for _, h := range c.Hooks {
		pc.Hooks = append(pc.Hooks, &pluginpb.HookDecl{Stage: h.Stage, Order: int32(h.Order), TimeoutMs: int32(h.Timeout.Milliseconds()), StreamUnsafe: h.StreamUnsafe})
	}
	for _, r := range c.Routes {
		pc.Routes = append(pc.Routes, &pluginpb.RouteDecl{Method: r.Method, Path: r.Path, Public: r.Public})
	}
	for _, s := range c.Schedules {
		pc.Schedules = append(pc.Schedules, &pluginpb.ScheduleDecl{Id: s.ID, Interval: s.Interval, Cron: s.Cron, Channel: s.Channel,
			Chat: s.Chat, Thread: s.Thread, Timezone: s.Timezone, Missed: s.Missed})
	}
	return pc
}
