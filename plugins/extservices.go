package plugins

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	pluginpb "github.com/opentalon/opentalon/proto"
)

// ProviderRequest is one LLM call to a provider plugin.
type ProviderRequest struct {
	Model       string
	System      string
	Messages    []core.ChatMessage
	Tools       []core.ToolSpec
	MaxTokens   int
	Temperature *float64
	// APIKey is the auth profile's credential ("" = none configured).
	APIKey string
}

// ProviderResponse is a provider plugin's answer.
type ProviderResponse struct {
	Text       string
	ToolCalls  []core.ToolCall
	Usage      core.Usage
	Model      string
	StopReason string
}

func completionRequest(r ProviderRequest) *pluginpb.CompletionRequest {
	out := &pluginpb.CompletionRequest{Model: r.Model, System: r.System, MaxTokens: int32(r.MaxTokens), Temperature: r.Temperature, ApiKey: r.APIKey}
	for _, m := range r.Messages {
		pm := &pluginpb.ChatMessage{Role: string(m.Role), Content: m.Content, ToolCallId: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, &pluginpb.LLMToolCall{Id: tc.ID, Plugin: tc.Plugin, Action: tc.Action, Args: tc.Args})
		}
		out.Messages = append(out.Messages, pm)
	}
	for _, t := range r.Tools {
		ts := &pluginpb.ToolSpec{Plugin: t.Plugin, Action: t.Action, Description: t.Description}
		for _, p := range t.Params {
			ts.Params = append(ts.Params, &pluginpb.Parameter{Name: p.Name, Description: p.Description, Type: p.Type, Required: p.Required})
		}
		out.Tools = append(out.Tools, ts)
	}
	return out
}

// providerResponse reads a completion, turning its error into a
// *core.Error whose kind the router's failover decides on.
func providerResponse(plugin string, r *pluginpb.CompletionResponse) (ProviderResponse, error) {
	if pe := r.GetError(); pe != nil {
		kind := core.KindUnavailable
		for k := core.KindUnknown; k <= core.KindMalformed; k++ {
			if k.String() == pe.GetKind() {
				kind = k
			}
		}
		msg := pe.GetMessage()
		if msg == "" {
			msg = pe.GetKind()
		}
		return ProviderResponse{}, &core.Error{Kind: kind, Msg: fmt.Sprintf("provider plugin %s: %s", plugin, msg),
			RetryAfter: time.Duration(pe.GetRetryAfterMs()) * time.Millisecond}
	}
	out := ProviderResponse{Text: r.GetText(), Model: r.GetModel(), StopReason: r.GetStopReason(),
		Usage: core.Usage{InputTokens: int(r.GetUsage().GetInputTokens()), OutputTokens: int(r.GetUsage().GetOutputTokens())}}
	for _, tc := range r.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, core.ToolCall{ID: tc.GetId(), Plugin: tc.GetPlugin(), Action: tc.GetAction(), Args: tc.GetArgs()})
	}
	return out, nil
}

// Complete asks provider plugin name for a whole answer. A plugin that
// is not running is KindUnavailable, so the router fails over.
func (x *Extensions) Complete(ctx context.Context, name string, req ProviderRequest) (ProviderResponse, error) {
	p, err := x.service(name, ServiceProvider)
	if err != nil {
		return ProviderResponse{}, err
	}
	resp, err := p.provider.Complete(ctx, completionRequest(req))
	if err != nil {
		return ProviderResponse{}, callError(name, "Complete", err)
	}
	return providerResponse(name, resp)
}

// Stream asks provider plugin name for an answer streamed as text
// deltas to onText, and returns the assembled answer.
func (x *Extensions) Stream(ctx context.Context, name string, req ProviderRequest, onText func(string)) (ProviderResponse, error) {
	p, err := x.service(name, ServiceProvider)
	if err != nil {
		return ProviderResponse{}, err
	}
	// The stream is left before its end (io.EOF) once the final answer
	// came: only cancelling its context frees it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := p.provider.Stream(ctx, completionRequest(req))
	if err != nil {
		return ProviderResponse{}, callError(name, "Stream", err)
	}
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return ProviderResponse{}, &core.Error{Kind: core.KindMalformed, Msg: fmt.Sprintf("provider plugin %s ended its stream without the final answer", name)}
		}
		if err != nil {
			return ProviderResponse{}, callError(name, "Stream", err)
		}
		if d := ch.GetDone(); d != nil {
			return providerResponse(name, d)
		}
		if t := ch.GetText(); t != "" && onText != nil {
			onText(t)
		}
	}
}

// Notify sends one operator event to notification plugin name.
func (x *Extensions) Notify(ctx context.Context, name string, e core.OpsEvent, suppressed int) error {
	p, err := x.service(name, ServiceNotify)
	if err != nil {
		return err
	}
	_, err = p.notify.Notify(ctx, &pluginpb.Notification{Kind: e.Kind, Subject: e.Subject, Message: e.Message,
		AtUnixMs: e.At.UnixMilli(), Details: e.Details, Suppressed: int32(suppressed)})
	if err != nil {
		return callError(name, "Notify", err)
	}
	return nil
}

// OnSchedule calls plugin name back for one firing of its schedule id.
func (x *Extensions) OnSchedule(ctx context.Context, name, id string, f core.Firing) (core.FiringResult, error) {
	p, ok := x.get(name)
	if !ok {
		return core.FiringResult{}, &core.Error{Kind: core.KindUnavailable, Msg: fmt.Sprintf("plugin %s is not running", name)}
	}
	r, err := p.sched.OnSchedule(ctx, &pluginpb.ScheduleFiring{Id: id, AtUnixMs: f.At.UnixMilli(),
		Channel: f.Conversation.Channel, Chat: f.Conversation.Chat, Thread: f.Conversation.Thread})
	if err != nil {
		return core.FiringResult{}, callError(name, "OnSchedule", err)
	}
	return core.FiringResult{Text: r.GetText(), Prompt: r.GetPrompt(), Skip: r.GetSkip(), Reason: "plugin " + name + " skipped it"}, nil
}

// Authorizer is a core.Authorizer backed by an auth provider plugin: its
// answers are cached for TTL (denials too); a failure is not cached.
type Authorizer struct {
	Ext    *Extensions
	Plugin string
	// TTL is plugins.auth.cache_ttl (default 5 minutes); Timeout bounds
	// one call (plugins.auth.timeout, default 2s).
	TTL     time.Duration
	Timeout time.Duration
	Now     func() time.Time

	mu    sync.Mutex
	cache map[string]authEntry
}

type authEntry struct {
	d   core.AuthDecision
	exp time.Time
}

var _ core.Authorizer = (*Authorizer)(nil)

// maxAuthCache bounds the cached answers.
const maxAuthCache = 10000

// Authorize implements core.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, channel, chat, user string) (core.AuthDecision, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	ttl, timeout := a.TTL, a.Timeout
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	key := channel + "\x00" + chat + "\x00" + user
	t := now()
	a.mu.Lock()
	if e, ok := a.cache[key]; ok && t.Before(e.exp) {
		a.mu.Unlock()
		return e.d, nil
	}
	a.mu.Unlock()
	p, err := a.Ext.service(a.Plugin, ServiceAuthorize)
	if err != nil {
		return core.AuthDeny, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := p.auth.Authorize(cctx, &pluginpb.AuthorizeRequest{Channel: channel, Chat: chat, UserId: user})
	if err != nil {
		return core.AuthDeny, callError(a.Plugin, "Authorize", err)
	}
	d := core.AuthDeny
	switch resp.GetDecision() {
	case pluginpb.AuthorizeResponse_ALLOW:
		d = core.AuthAllow
	case pluginpb.AuthorizeResponse_ADMIN:
		d = core.AuthAdmin
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) >= maxAuthCache {
		a.cache = map[string]authEntry{}
	}
	a.cache[key] = authEntry{d: d, exp: t.Add(ttl)}
	a.mu.Unlock()
	return d, nil
}

// Blobs is a core.BlobStore backed by a blob storage plugin. A blob
// travels in one gRPC message: at most 32 MiB.
type Blobs struct {
	Ext    *Extensions
	Plugin string
}

var _ core.BlobStore = (*Blobs)(nil)

// Put implements core.BlobStore.
func (b *Blobs) Put(ctx context.Context, key string, data []byte) error {
	if err := core.ValidBlobKey(key); err != nil {
		return err
	}
	p, err := b.Ext.service(b.Plugin, ServiceBlobs)
	if err != nil {
		return err
	}
	if _, err := p.blobs.Put(ctx, &pluginpb.BlobPutRequest{Key: key, Data: data}); err != nil {
		return callError(b.Plugin, "blob Put "+key, err)
	}
	return nil
}

// Get implements core.BlobStore.
func (b *Blobs) Get(ctx context.Context, key string) ([]byte, error) {
	if err := core.ValidBlobKey(key); err != nil {
		return nil, err
	}
	p, err := b.Ext.service(b.Plugin, ServiceBlobs)
	if err != nil {
		return nil, err
	}
	r, err := p.blobs.Get(ctx, &pluginpb.BlobGetRequest{Key: key})
	if err != nil {
		return nil, callError(b.Plugin, "blob Get "+key, err)
	}
	if !r.GetFound() {
		return nil, core.Errorf(core.KindNotFound, "no blob %s", key)
	}
	if r.GetData() == nil {
		return []byte{}, nil
	}
	return r.GetData(), nil
}

// Delete implements core.BlobStore.
func (b *Blobs) Delete(ctx context.Context, key string) error {
	if err := core.ValidBlobKey(key); err != nil {
		return err
	}
	p, err := b.Ext.service(b.Plugin, ServiceBlobs)
	if err != nil {
		return err
	}
	if _, err := p.blobs.Delete(ctx, &pluginpb.BlobDeleteRequest{Key: key}); err != nil {
		return callError(b.Plugin, "blob Delete "+key, err)
	}
	return nil
}
