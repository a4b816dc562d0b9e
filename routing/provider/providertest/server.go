package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/opentalon/opentalon/core"
)

// Received is one request as the fake LLM saw it, decoded from the wire
// back into core's vocabulary so tests can assert what the model was shown.
type Received struct {
	// N is the 1-based arrival order.
	N      int
	Method string
	Path   string
	Header http.Header
	// APIKey is the credential presented: the x-api-key header, or the
	// token of an "Authorization: Bearer" header ("" when none was sent).
	APIKey string
	// Bearer says the credential came in an Authorization: Bearer header.
	Bearer bool
	Model  string
	// System is the system prompt: Anthropic's top-level system field, or
	// the system-role messages of an OpenAI request joined by "\n\n".
	System string
	// Messages are the non-system messages in order. An Anthropic user
	// message holding several tool_result blocks becomes one tool message
	// per block, as the gateway wrote them.
	Messages []core.ChatMessage
	// Tools are the offered tools, the wire name split at the first "__"
	// into Plugin and Action, params sorted by name.
	Tools        []core.ToolSpec
	Stream       bool
	IncludeUsage bool // OpenAI stream_options.include_usage
	MaxTokens    int
	Temperature  *float64
	// Body is the raw request body.
	Body []byte
	// DecodeErr is set when the body was not valid JSON for the API; the
	// server answers such requests with a 400 in the API's error shape.
	DecodeErr error
	// Audio is the file of a POST /audio/transcriptions (nil for a chat
	// request), AudioName its file name; Model is the form's model. The
	// answer is {"text": Script.Text}.
	Audio     []byte
	AudioName string
}

// LastUser returns the content of the last user-role message, "" if none.
func (r Received) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == core.RoleUser {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Script is one scripted answer. The zero Script means "answer with the
// default echo".
type Script struct {
	// Text is the assistant's text.
	Text string
	// ToolCalls are tool calls to answer with; empty IDs are filled in
	// ("call_<n>" / "toolu_<n>").
	ToolCalls []core.ToolCall
	// RawArgs, when set, replaces the JSON arguments of ToolCalls[i] with
	// RawArgs[i] verbatim (to send numbers, objects or broken JSON).
	RawArgs []string
	// Usage overrides the reported token counts (default: a word count).
	Usage *core.Usage
	// StopReason is the wire finish/stop reason (default: "stop" or
	// "tool_calls" for OpenAI, "end_turn" or "tool_use" for Anthropic).
	StopReason string
	// Model is the model reported back (default: the requested model).
	Model string
	// Chunks splits the text into these stream deltas (default: at spaces).
	// They are sent as given; Text is ignored when Chunks is set.
	Chunks []string
	// ChunkDelay is the pause between two stream deltas (a model that
	// writes at a given speed).
	ChunkDelay time.Duration

	// Status, when not 0 or 200, answers with that HTTP status, Header and
	// Body. An empty Body gets a realistic error JSON of the server's API.
	Status int
	Header map[string]string
	// Body, with Status 0 or 200, is sent verbatim as a successful answer
	// (JSON for a complete call, raw SSE text for a stream): use it for
	// malformed answers and mid-stream error events.
	Body string
}

// Echo returns the default answer to a request: "echo: <last user message>".
func Echo(r Received) Script { return Script{Text: "echo: " + r.LastUser()} }

// api is the dialect a Server speaks.
type api interface {
	// paths are the request paths served.
	paths() []string
	// decode fills the model-facing fields of r from the request body.
	decode(r *Received) error
	// writeError writes an error answer in the dialect.
	errorBody(status int, msg string) string
	complete(w http.ResponseWriter, r *Received, s *Script, n int)
	// stream writes the answer as a stream; it stops early when ctx (the
	// request's) ends: the client went away.
	stream(ctx context.Context, w http.ResponseWriter, r *Received, s *Script, n int)
	basePath() string
}

// Server is a fake LLM API on 127.0.0.1. All methods are safe for
// concurrent use; it is closed by the test's cleanup.
type Server struct {
	// URL is the server's root, e.g. http://127.0.0.1:43123.
	URL string

	api api
	hs  *httptest.Server

	mu          sync.Mutex
	reply       func(Received) Script
	queue       []Script
	requireKey  string
	received    []Received
	count       int  // requests received, kept or not
	forget      bool // received is not kept (Forget)
	inFlight    int
	maxInFlight int
	holding     bool
	release     chan struct{} // closed by Release
	changed     chan struct{} // closed and replaced on every state change
	closed      chan struct{}
	closeOnce   sync.Once
}

// NewOpenAI starts a fake OpenAI Chat Completions server. Point a provider
// at BaseURL(); it serves POST /v1/chat/completions (and /chat/completions).
func NewOpenAI(t testing.TB) *Server { return start(t, openAI{}) }

// NewAnthropic starts a fake Anthropic Messages server. Point a provider at
// BaseURL(); it serves POST /v1/messages.
func NewAnthropic(t testing.TB) *Server { return start(t, anthropic{}) }

func start(t testing.TB, a api) *Server {
	t.Helper()
	s := &Server{
		api:     a,
		release: make(chan struct{}),
		changed: make(chan struct{}),
		closed:  make(chan struct{}),
	}
	mux := http.NewServeMux()
	for _, p := range a.paths() {
		mux.HandleFunc("POST "+p, s.handle)
	}
	s.hs = httptest.NewServer(mux)
	s.URL = s.hs.URL
	t.Cleanup(s.Close)
	return s
}

// BaseURL is the value for a provider's base_url: URL+"/v1" for OpenAI
// (whose default base includes /v1), URL for Anthropic.
func (s *Server) BaseURL() string { return s.URL + s.api.basePath() }

// Close releases held requests, aborting them, and shuts the server down.
// It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.hs.CloseClientConnections()
		s.hs.Close()
	})
}

// SetReply sets the function that answers requests once the queue of
// Enqueue'd scripts is empty; nil restores the default Echo.
func (s *Server) SetReply(fn func(Received) Script) {
	s.mu.Lock()
	s.reply = fn
	s.mu.Unlock()
}

// Enqueue appends canned answers, used one per request in order before
// the reply function.
func (s *Server) Enqueue(scripts ...Script) {
	s.mu.Lock()
	s.queue = append(s.queue, scripts...)
	s.mu.Unlock()
}

// RequireKey makes the server refuse, with a realistic 401, requests that
// do not present key (as x-api-key or Bearer). "" accepts anything.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	s.requireKey = key
	s.mu.Unlock()
}

// Hold makes requests block after they are recorded, until Release (or
// until the client goes away or the server closes). Requests already held
// stay held.
func (s *Server) Hold() {
	s.mu.Lock()
	s.holding = true
	s.mu.Unlock()
}

// Release lets every held request proceed and stops holding new ones.
func (s *Server) Release() {
	s.mu.Lock()
	if s.holding {
		s.holding = false
		close(s.release)
		s.release = make(chan struct{})
	}
	s.mu.Unlock()
}

// InFlight is the number of requests being handled right now (held ones
// included).
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// MaxInFlight is the highest InFlight seen since the server started.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// Count is the number of requests received so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Forget stops keeping the requests that arrive from now on: they are
// counted (Count, WaitRequests, Received.N) and answered as before, but
// Requests and Last no longer see them. A load test calls it so that
// thousands of retained request bodies do not fill its process's heap,
// where they would lengthen every garbage collection of the gateway
// running beside them.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget = true
}

// Requests returns a copy of every request received so far, in order
// (those that arrived after Forget excepted).
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Last returns the most recent request kept (see Forget); ok is false if
// there was none.
func (s *Server) Last() (r Received, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.received) == 0 {
		return Received{}, false
	}
	return s.received[len(s.received)-1], true
}

// WaitRequests blocks until at least n requests have arrived or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.count >= n }, fmt.Sprintf("%d requests", n))
}

// WaitInFlight blocks until at least n requests are in flight (for
// example held) or ctx ends.
func (s *Server) WaitInFlight(ctx context.Context, n int) error {
	return s.wait(ctx, func() bool { return s.inFlight >= n }, fmt.Sprintf("%d requests in flight", n))
}

func (s *Server) wait(ctx context.Context, cond func() bool, what string) error {
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("providertest: waiting for %s: %w", what, ctx.Err())
		}
	}
}

// notify wakes waiters; s.mu must be held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	rec := Received{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body}
	if k := req.Header.Get("x-api-key"); k != "" {
		rec.APIKey = k
	}
	if a := req.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		rec.APIKey, rec.Bearer = strings.TrimPrefix(a, "Bearer "), true
	}
	rec.DecodeErr = s.api.decode(&rec)

	s.mu.Lock()
	s.count++
	rec.N = s.count
	if !s.forget {
		s.received = append(s.received, rec)
	}
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.notify()
	holding, release := s.holding, s.release
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.notify()
		s.mu.Unlock()
	}()

	if holding {
		select {
		case <-release:
		case <-req.Context().Done():
			return
		case <-s.closed:
			panic(http.ErrAbortHandler)
		}
	}

	// The reply function runs outside the lock so it may call the
	// Server's own methods.
	s.mu.Lock()
	requireKey, reply := s.requireKey, s.reply
	var sc Script
	queued := len(s.queue) > 0
	if queued {
		sc = s.queue[0]
		s.queue = s.queue[1:]
	}
	s.mu.Unlock()
	switch {
	case queued:
	case reply != nil:
		sc = reply(rec)
	default:
		sc = Echo(rec)
	}

	switch {
	case rec.DecodeErr != nil:
		writeRaw(w, http.StatusBadRequest, nil, "application/json",
			s.api.errorBody(http.StatusBadRequest, "could not parse the JSON body of your request: "+rec.DecodeErr.Error()))
	case requireKey != "" && rec.APIKey != requireKey:
		writeRaw(w, http.StatusUnauthorized, nil, "application/json",
			s.api.errorBody(http.StatusUnauthorized, "invalid x-api-key: incorrect API key provided"))
	case sc.Status != 0 && sc.Status != http.StatusOK:
		b := sc.Body
		if b == "" {
			b = s.api.errorBody(sc.Status, http.StatusText(sc.Status))
		}
		writeRaw(w, sc.Status, sc.Header, "application/json", b)
	case sc.Body != "":
		ct := "application/json"
		if rec.Stream {
			ct = "text/event-stream"
		}
		writeRaw(w, http.StatusOK, sc.Header, ct, sc.Body)
	case rec.Stream:
		setHeaders(w, sc.Header, "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		s.api.stream(req.Context(), w, &rec, &sc, rec.N)
	default:
		setHeaders(w, sc.Header, "application/json")
		s.api.complete(w, &rec, &sc, rec.N)
	}
}

// pause waits d between two stream deltas; false when ctx ended first
// (a client that went away gets no more of the stream, so a killed
// gateway does not keep the handler, and the server's Close, busy for
// the rest of a slow answer).
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func setHeaders(w http.ResponseWriter, h map[string]string, contentType string) {
	w.Header().Set("Content-Type", contentType)
	for k, v := range h {
		w.Header().Set(k, v)
	}
}

func writeRaw(w http.ResponseWriter, status int, h map[string]string, contentType, body string) {
	setHeaders(w, h, contentType)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// usage returns the script's usage or a deterministic word count.
func usage(r *Received, s *Script, text string) core.Usage {
	if s.Usage != nil {
		return *s.Usage
	}
	in := words(r.System)
	for _, m := range r.Messages {
		in += words(m.Content)
	}
	out := words(text) + len(s.ToolCalls)
	return core.Usage{InputTokens: max(in, 1), OutputTokens: max(out, 1)}
}

// words is len(strings.Fields(s)) without building the fields: the
// fake counts every request's prompt, which under a load test would
// otherwise allocate more than the gateway it measures.
func words(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// chunks splits the text into stream deltas: the script's, or at spaces
// (each delta after the first keeps its leading space).
func chunks(s *Script) []string {
	if s.Chunks != nil {
		return s.Chunks
	}
	if s.Text == "" {
		return nil
	}
	var out []string
	rest := s.Text
	for {
		i := strings.Index(rest[min(1, len(rest)):], " ")
		if i < 0 {
			return append(out, rest)
		}
		i += min(1, len(rest))
		out = append(out, rest[:i])
		rest = rest[i:]
	}
}

// args returns the JSON arguments of tool call i.
func args(s *Script, i int) string {
	if i < len(s.RawArgs) && s.RawArgs[i] != "" {
		return s.RawArgs[i]
	}
	a := s.ToolCalls[i].Args
	if a == nil {
		a = map[string]string{}
	}
	b, _ := json.Marshal(a)
	return string(b)
}

// toolName is the wire name of a call: plugin + "__" + action.
func toolName(c core.ToolCall) string {
	if c.Plugin == "" {
		return c.Action
	}
	return c.Plugin + "__" + c.Action
}

// splitName splits a wire tool name at the first "__".
func splitName(name string) (plugin, action string) {
	if p, a, ok := strings.Cut(name, "__"); ok {
		return p, a
	}
	return "", name
}

// splitArgs cuts a JSON text into two pieces so streamed tool arguments
// arrive in more than one delta.
func splitArgs(a string) []string {
	if len(a) < 2 {
		return []string{a}
	}
	return []string{a[:len(a)/2], a[len(a)/2:]}
}

// argsText renders decoded JSON arguments as core's map of strings.
func argsText(raw json.RawMessage) map[string]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = s
		} else {
			out[k] = string(v)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
