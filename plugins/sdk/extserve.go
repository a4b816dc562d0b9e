package sdk

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	pluginpb "github.com/opentalon/opentalon/proto"
)

// registerExtensions registers the extension services p implements.
func registerExtensions(srv *grpc.Server, p Plugin) {
	_, pre := p.(PreHooker)
	_, post := p.(PostHooker)
	if pre || post {
		pluginpb.RegisterHookServiceServer(srv, hookServer{p: p})
	}
	if h, ok := p.(http.Handler); ok {
		pluginpb.RegisterHTTPServiceServer(srv, httpServer{h: h})
	}
	if s, ok := p.(Scheduler); ok {
		pluginpb.RegisterScheduleServiceServer(srv, schedServer{s: s})
	}
	if n, ok := p.(Notifier); ok {
		pluginpb.RegisterNotifyServiceServer(srv, notifyServer{n: n})
	}
	if a, ok := p.(Authorizer); ok {
		pluginpb.RegisterAuthServiceServer(srv, authServer{a: a})
	}
	if b, ok := p.(BlobStore); ok {
		pluginpb.RegisterBlobServiceServer(srv, blobServer{b: b})
	}
	if pr, ok := p.(Provider); ok {
		pluginpb.RegisterProviderServiceServer(srv, providerServer{p: pr})
	}
}

type hookServer struct {
	pluginpb.UnimplementedHookServiceServer
	p Plugin
}

func hookReq(r *pluginpb.HookRequest) HookRequest {
	return HookRequest{Text: r.GetText(), Metadata: r.GetMetadata(), Channel: r.GetChannel(), Chat: r.GetChat(), Thread: r.GetThread(),
		UserID: r.GetUserId(), UserName: r.GetUserName(), SessionID: r.GetSessionId(), Question: r.GetQuestion()}
}

func hookResp(h HookResult) *pluginpb.HookResponse {
	return &pluginpb.HookResponse{Text: h.Text, Metadata: h.Metadata, Drop: h.Drop, Reason: h.Reason, Reply: h.Reply}
}

func (s hookServer) PreHook(ctx context.Context, r *pluginpb.HookRequest) (*pluginpb.HookResponse, error) {
	h, ok := s.p.(PreHooker)
	if !ok {
		return nil, errors.New("this plugin has no pre hook")
	}
	res, err := h.PreHook(ctx, hookReq(r))
	if err != nil {
		return nil, err
	}
	return hookResp(res), nil
}

func (s hookServer) PostHook(ctx context.Context, r *pluginpb.HookRequest) (*pluginpb.HookResponse, error) {
	h, ok := s.p.(PostHooker)
	if !ok {
		return nil, errors.New("this plugin has no post hook")
	}
	res, err := h.PostHook(ctx, hookReq(r))
	if err != nil {
		return nil, err
	}
	return hookResp(res), nil
}

type httpServer struct {
	pluginpb.UnimplementedHTTPServiceServer
	h http.Handler
}

// maxResponse bounds an HTTP response a handler writes.
const maxResponse = 16 << 20

// recorder is the http.ResponseWriter a handler writes to.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len()+len(b) > maxResponse {
		w.over = true
		return 0, errors.New("response larger than 16 MiB")
	}
	return w.body.Write(b)
}

func (s httpServer) HandleHTTP(ctx context.Context, r *pluginpb.HTTPRequest) (resp *pluginpb.HTTPResponse, err error) {
	var injected []Message
	ctx = context.WithValue(ctx, injectKey{}, &injected)
	if rp := r.GetRoutePath(); rp != "" {
		ctx = context.WithValue(ctx, routeKey{}, Route{Method: r.GetRouteMethod(), Path: rp})
	}
	target := "/" + r.GetPath()
	if q := r.GetQuery(); q != "" {
		target += "?" + q
	}
	req, err := http.NewRequestWithContext(ctx, r.GetMethod(), target, bytes.NewReader(r.GetBody()))
	if err != nil {
		return nil, err
	}
	for _, h := range r.GetHeaders() {
		req.Header.Add(h.GetName(), h.GetValue())
	}
	req.Host = req.Header.Get("Host")
	req.RemoteAddr = r.GetRemoteAddr()
	req.RequestURI = target
	w := &recorder{header: http.Header{}}
	defer func() {
		if p := recover(); p != nil {
			resp, err = &pluginpb.HTTPResponse{Status: http.StatusInternalServerError, Body: []byte("the plugin failed")}, nil
		}
	}()
	s.h.ServeHTTP(w, req)
	if w.over {
		return &pluginpb.HTTPResponse{Status: http.StatusInternalServerError, Body: []byte("the plugin's response is too large")}, nil
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	out := &pluginpb.HTTPResponse{Status: int32(w.status), Body: w.body.Bytes()}
	for k, vs := range w.header {
		for _, v := range vs {
			out.Headers = append(out.Headers, &pluginpb.Header{Name: k, Value: v})
		}
	}
	for _, m := range injected {
		out.Inject = append(out.Inject, &pluginpb.InjectMessage{Channel: m.Channel, Chat: m.Chat, Thread: m.Thread, Text: m.Text,
			UserId: m.UserID, UserName: m.UserName, Id: m.ID})
	}
	return out, nil
}

// VerifyHMAC checks a signature header of the form "sha256=<hex>" (or
// the bare hex) against the HMAC-SHA256 of body under secret, in
// constant time: the check a public route makes (GitHub's
// X-Hub-Signature-256, OpenTalon's own X-OpenTalon-Signature).
func VerifyHMAC(secret, body []byte, header string) bool {
	sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(header), "sha256="))
	if err != nil || len(sig) != sha256.Size || len(secret) == 0 {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(sig, m.Sum(nil))
}

type schedServer struct {
	pluginpb.UnimplementedScheduleServiceServer
	s Scheduler
}

func (s schedServer) OnSchedule(ctx context.Context, f *pluginpb.ScheduleFiring) (*pluginpb.ScheduleResult, error) {
	r, err := s.s.OnSchedule(ctx, Firing{ID: f.GetId(), At: time.UnixMilli(f.GetAtUnixMs()), Channel: f.GetChannel(), Chat: f.GetChat(), Thread: f.GetThread()})
	if err != nil {
		return nil, err
	}
	return &pluginpb.ScheduleResult{Text: r.Text, Prompt: r.Prompt, Skip: r.Skip}, nil
}

type notifyServer struct {
	pluginpb.UnimplementedNotifyServiceServer
	n Notifier
}

func (s notifyServer) Notify(ctx context.Context, n *pluginpb.Notification) (*emptypb.Empty, error) {
	err := s.n.Notify(ctx, Notification{Kind: n.GetKind(), Subject: n.GetSubject(), Message: n.GetMessage(),
		At: time.UnixMilli(n.GetAtUnixMs()), Details: n.GetDetails(), Suppressed: int(n.GetSuppressed())})
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

type authServer struct {
	pluginpb.UnimplementedAuthServiceServer
	a Authorizer
}

func (s authServer) Authorize(ctx context.Context, r *pluginpb.AuthorizeRequest) (*pluginpb.AuthorizeResponse, error) {
	d, err := s.a.Authorize(ctx, AuthRequest{Channel: r.GetChannel(), Chat: r.GetChat(), UserID: r.GetUserId(), UserName: r.GetUserName()})
	if err != nil {
		return nil, err
	}
	out := &pluginpb.AuthorizeResponse{}
	switch d {
	case Allow:
		out.Decision = pluginpb.AuthorizeResponse_ALLOW
	case Admin:
		out.Decision = pluginpb.AuthorizeResponse_ADMIN
	}
	return out, nil
}

type blobServer struct {
	pluginpb.UnimplementedBlobServiceServer
	b BlobStore
}

func (s blobServer) Put(ctx context.Context, r *pluginpb.BlobPutRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, s.b.PutBlob(ctx, r.GetKey(), r.GetData())
}

func (s blobServer) Get(ctx context.Context, r *pluginpb.BlobGetRequest) (*pluginpb.BlobGetResponse, error) {
	data, found, err := s.b.GetBlob(ctx, r.GetKey())
	if err != nil {
		return nil, err
	}
	return &pluginpb.BlobGetResponse{Data: data, Found: found}, nil
}

func (s blobServer) Delete(ctx context.Context, r *pluginpb.BlobDeleteRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, s.b.DeleteBlob(ctx, r.GetKey())
}

type providerServer struct {
	pluginpb.UnimplementedProviderServiceServer
	p Provider
}

func completionReq(r *pluginpb.CompletionRequest) CompletionRequest {
	out := CompletionRequest{Model: r.GetModel(), System: r.GetSystem(), MaxTokens: int(r.GetMaxTokens()), APIKey: r.GetApiKey()}
	if r.Temperature != nil {
		t := r.GetTemperature()
		out.Temperature = &t
	}
	for _, m := range r.GetMessages() {
		cm := ChatMessage{Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
		for _, tc := range m.GetToolCalls() {
			cm.ToolCalls = append(cm.ToolCalls, ToolCall{ID: tc.GetId(), Plugin: tc.GetPlugin(), Action: tc.GetAction(), Args: tc.GetArgs()})
		}
		out.Messages = append(out.Messages, cm)
	}
	for _, t := range r.GetTools() {
		ts := ToolSpec{Plugin: t.GetPlugin(), Action: t.GetAction(), Description: t.GetDescription()}
		for _, p := range t.GetParams() {
			ts.Params = append(ts.Params, Param{Name: p.GetName(), Description: p.GetDescription(), Type: p.GetType(), Required: p.GetRequired()})
		}
		out.Tools = append(out.Tools, ts)
	}
	return out
}

func completionResp(r CompletionResponse, err error) *pluginpb.CompletionResponse {
	if err != nil {
		var pe *ProviderError
		if errors.As(err, &pe) {
			return &pluginpb.CompletionResponse{Error: &pluginpb.ProviderError{Kind: pe.Kind, Message: pe.Message, RetryAfterMs: pe.RetryAfter.Milliseconds()}}
		}
		return &pluginpb.CompletionResponse{Error: &pluginpb.ProviderError{Kind: KindUnavailable, Message: err.Error()}}
	}
	out := &pluginpb.CompletionResponse{Text: r.Text, Model: r.Model, StopReason: r.StopReason,
		Usage: &pluginpb.Usage{InputTokens: int64(r.InputTokens), OutputTokens: int64(r.OutputTokens)}}
	for _, tc := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &pluginpb.LLMToolCall{Id: tc.ID, Plugin: tc.Plugin, Action: tc.Action, Args: tc.Args})
	}
	return out
}

func (s providerServer) Complete(ctx context.Context, r *pluginpb.CompletionRequest) (*pluginpb.CompletionResponse, error) {
	return completionResp(s.p.Complete(ctx, completionReq(r))), nil
}

func (s providerServer) Stream(r *pluginpb.CompletionRequest, st grpc.ServerStreamingServer[pluginpb.CompletionChunk]) error {
	req := completionReq(r)
	var resp CompletionResponse
	var err error
	if sp, ok := s.p.(StreamProvider); ok {
		resp, err = sp.Stream(st.Context(), req, func(d string) error {
			return st.Send(&pluginpb.CompletionChunk{Text: d})
		})
	} else {
		resp, err = s.p.Complete(st.Context(), req)
		if err == nil && resp.Text != "" {
			if serr := st.Send(&pluginpb.CompletionChunk{Text: resp.Text}); serr != nil {
				return serr
			}
		}
	}
	return st.Send(&pluginpb.CompletionChunk{Done: completionResp(resp, err)})
}
