package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Options configure a provider. Only ID is needed in practice; the rest
// have defaults. Construction has no side effects.
type Options struct {
	// ID is the provider's id in models.providers ("openai", "ollama", …);
	// it names the provider in errors and logs. Defaults to the API name.
	ID string
	// BaseURL is the API root (models.providers.<id>.base_url). Defaults to
	// https://api.openai.com/v1 or https://api.anthropic.com.
	BaseURL string
	// Headers are extra request headers (models.providers.<id>.headers);
	// they override the provider's defaults but not the credential.
	Headers map[string]string
	// Timeout bounds one whole call, streaming included (0 = only the
	// caller's context bounds it).
	Timeout time.Duration
	// HTTPClient sends the requests (default: a new client on the default
	// transport). A copy is used whose redirect policy refuses redirects
	// to another scheme or host.
	HTTPClient *http.Client
	// Logger receives debug lines per call (default: discard). Keys are
	// never logged.
	Logger *slog.Logger
	// Now is the clock, used to read Retry-After dates (default time.Now).
	Now func() time.Time
	// MaxTokens is the answer cap when a Request sets none. Anthropic
	// requires one and defaults to 4096; OpenAI sends none by default.
	MaxTokens int
	// IdleConns is how many idle connections the provider's own client
	// keeps to its endpoint (at least idleConnsPerHost): as many as its
	// calls may run at once (llm.max_concurrent_*), so a sustained load
	// reuses its connections instead of dialling, a TLS handshake each,
	// every call beyond the kept ones. Not used with HTTPClient.
	IdleConns int
}

// maxBody bounds a complete (non-streaming) answer read into memory, and
// maxErrorBody an error answer.
const (
	maxBody      = 32 << 20
	maxErrorBody = 64 << 10
)

// client is the HTTP plumbing both APIs share.
type client struct {
	id   string
	base string
	// query is base_url's query ("key=…" for a server that takes its key
	// there), put after the path of every call.
	query     string
	headers   map[string]string
	timeout   time.Duration
	hc        *http.Client
	log       *slog.Logger
	now       func() time.Time
	maxTokens int
	// hide are the base URL's credentials (core.URLSecrets) and the
	// extra headers' values (models.providers.*.headers, secrets too),
	// kept out of every error.
	hide []string
}

func newClient(o Options, defaultID, defaultBase string) client {
	base, query, _ := strings.Cut(o.BaseURL, "?")
	c := client{
		id: o.ID, base: strings.TrimRight(base, "/"), query: query, headers: o.Headers, timeout: o.Timeout,
		hc: o.HTTPClient, log: o.Logger, now: o.Now, maxTokens: o.MaxTokens,
	}
	if c.id == "" {
		c.id = defaultID
	}
	if c.base == "" {
		c.base = defaultBase
	}
	c.hide = append(core.URLSecrets(cmpOr(o.BaseURL, defaultBase)), headerSecrets(c.headers)...)
	// Without a client of the caller's: a transport of the provider's own
	// that keeps idleConnsPerHost idle connections (Go's default of two
	// re-dials, TLS included, whenever more calls than that were in
	// flight at once).
	hc := http.Client{Transport: newTransport(o.IdleConns)}
	if c.hc != nil {
		hc = *c.hc
	}
	hc.CheckRedirect = sameOrigin(hc.CheckRedirect)
	c.hc = &hc
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// redirectError is a redirect the client refused to follow.
type redirectError struct{ to string }

func (e *redirectError) Error() string { return "redirect to " + e.to + " refused" }

// sameOrigin is a redirect policy that follows a redirect only to the
// scheme and host (port included) the call started at, then applies
// next (Go's default when nil). Go drops only Authorization (and only
// for another host name) on a redirect: x-api-key and custom credential
// headers would follow the request anywhere.
func sameOrigin(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		from := via[0].URL
		if !strings.EqualFold(req.URL.Scheme, from.Scheme) || !strings.EqualFold(req.URL.Host, from.Host) {
			return &redirectError{to: req.URL.Scheme + "://" + req.URL.Host}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// call is one request in flight: its context (with the provider timeout)
// and the answer when the status was 2xx.
type call struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	resp   *http.Response
	start  time.Time
}

// close releases the answer and the timeout.
func (c *call) close() {
	if c.resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c.resp.Body, 4<<10))
		c.resp.Body.Close()
	}
	c.cancel()
}

// post sends body as JSON to path. defaults are headers the API needs,
// auth sets the credential. A non-2xx answer is read and returned as a
// classified *core.Error; on success the caller reads call.resp and must
// call close.
func (c *client) post(ctx context.Context, path string, body any, secret string, defaults map[string]string, auth func(http.Header)) (*call, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("provider %s: encoding request: %w", c.id, err)
	}
	return c.postBody(ctx, path, "application/json", payload, secret, defaults, auth)
}

// url is the address of a call to path: base_url's path, then path,
// then base_url's query.
func (c *client) url(path string) string {
	if c.query == "" {
		return c.base + path
	}
	return c.base + path + "?" + c.query
}

// JoinURL is the address of path on a base URL as the clients call it:
// path after base's path, base's query (a key some servers take as
// ?key=) after the whole path.
func JoinURL(base, path string) string {
	b, q, ok := strings.Cut(base, "?")
	b = strings.TrimRight(b, "/")
	if !ok {
		return b + path
	}
	return b + path + "?" + q
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// postBody is post with a body already encoded as contentType.
func (c *client) postBody(ctx context.Context, path, contentType string, payload []byte, secret string, defaults map[string]string, auth func(http.Header)) (*call, error) {
	cl := &call{parent: ctx, start: c.now()}
	if c.timeout > 0 {
		cl.ctx, cl.cancel = context.WithTimeout(ctx, c.timeout)
	} else {
		cl.ctx, cl.cancel = context.WithCancel(ctx)
	}
	req, err := http.NewRequestWithContext(cl.ctx, http.MethodPost, c.url(path), bytes.NewReader(payload))
	if err != nil {
		cl.cancel()
		return nil, c.hideSecrets(fmt.Errorf("provider %s: bad base_url (models.providers.%s.base_url): %w", c.id, c.id, err))
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range defaults {
		req.Header.Set(k, v)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	auth(req.Header)

	resp, err := c.hc.Do(req)
	var re *redirectError
	if errors.As(err, &re) {
		cl.cancel()
		return nil, &core.Error{Kind: core.KindUnavailable,
			Msg: fmt.Sprintf("provider %s: the server redirected the call to %s, another host; it is not followed, so the credential stays here: set models.providers.%s.base_url to the address that answers", c.id, re.to, c.id)}
	}
	if err != nil {
		err = c.hideSecrets(transportError(ctx, cl.ctx, c.id, err, secret))
		cl.cancel()
		c.log.DebugContext(ctx, "llm call failed", "provider", c.id, "path", path, "err", err)
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		cl.cancel()
		e := httpError(c.id, resp.StatusCode, resp.Header, b, c.now(), secret)
		c.hideSecrets(e)
		c.log.DebugContext(ctx, "llm call refused", "provider", c.id, "path", path, "status", resp.StatusCode, "kind", e.Kind.String(), "err", e)
		return nil, e
	}
	cl.resp = resp
	return cl, nil
}

// readErr classifies a failure while reading a 2xx answer's body.
func (c *client) readErr(cl *call, err error, secret string) error {
	return c.hideSecrets(transportError(cl.parent, cl.ctx, c.id, err, secret))
}

// done logs a finished call.
func (c *client) done(ctx context.Context, cl *call, model string, r *Response, stream bool) {
	c.log.DebugContext(ctx, "llm call", "provider", c.id, "model", model, "stream", stream,
		"stop", r.StopReason, "input_tokens", r.Usage.InputTokens, "output_tokens", r.Usage.OutputTokens,
		"tool_calls", len(r.ToolCalls), "ms", c.now().Sub(cl.start).Milliseconds())
}

// readBody reads a complete answer, bounded.
func (c *client) readBody(cl *call, secret string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(cl.resp.Body, maxBody+1))
	if err != nil {
		return nil, c.readErr(cl, err, secret)
	}
	if len(b) > maxBody {
		return nil, malformed(c.id, fmt.Sprintf("answer larger than %d bytes", maxBody), nil, secret)
	}
	return b, nil
}

// stream reads a streaming answer from cl: SSE through read, or, from a
// server that ignored "stream" and answered plain JSON, through parse
// (its whole text then arrives as one delta).
func (c *client) stream(ctx context.Context, cl *call, model, secret string, onText func(string),
	parse func(body []byte, secret string) (*Response, error),
	read func(cl *call, onText func(string), secret string) (*Response, error)) (*Response, error) {
	if onText == nil {
		onText = func(string) {}
	}
	var r *Response
	var err error
	if answersJSON(cl.resp) {
		var body []byte
		if body, err = c.readBody(cl, secret); err != nil {
			return nil, c.hideSecrets(err)
		}
		if r, err = parse(body, secret); err != nil {
			return nil, c.hideSecrets(err)
		}
		if r.Text != "" {
			onText(r.Text)
		}
	} else if r, err = read(cl, onText, secret); err != nil {
		// An error event in a 200 stream may quote the request as an
		// error page does.
		return nil, c.hideSecrets(err)
	}
	c.done(ctx, cl, model, r, true)
	return r, nil
}

// answersJSON reports whether a streaming call was answered with one
// JSON document instead of an event stream. The body decides, not the
// label: a server that ignored "stream" may label its JSON text/plain (Go's
// sniffing of an unlabelled body), text/event-stream or nothing, and one
// may label its event stream application/json. A JSON answer starts with
// "{", which no event stream does (its lines start with a field name or
// ":"). The bytes peeked stay in the body. The peek needs a byte: its
// buffer is bufio's smallest (reads of the stream past what it holds go
// straight to the body), not a second 4 KiB beside the stream reader's.
func answersJSON(resp *http.Response) bool {
	br := bufio.NewReaderSize(resp.Body, 16)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
	for {
		b, err := br.Peek(1)
		if err != nil {
			return strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "application/json")
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			if _, err := br.Discard(1); err != nil {
				return false
			}
		default:
			return b[0] == '{'
		}
	}
}

// isEventStream reports whether body, the answer to a non-streaming
// call, is an event stream: a server that always streams ignores
// "stream": false. Its first line names an SSE field or is a comment.
func isEventStream(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	for _, p := range []string{"data:", "event:", "id:", "retry:", ":"} {
		if bytes.HasPrefix(b, []byte(p)) {
			return true
		}
	}
	return false
}

// complete reads a whole (non-streaming) answer from cl through parse,
// or, from a server that streamed anyway, through read.
func (c *client) complete(ctx context.Context, cl *call, model, secret string,
	parse func(body []byte, secret string) (*Response, error),
	read func(cl *call, onText func(string), secret string) (*Response, error)) (*Response, error) {
	body, err := c.readBody(cl, secret)
	if err != nil {
		return nil, c.hideSecrets(err)
	}
	var r *Response
	if isEventStream(body) {
		cl.resp.Body = io.NopCloser(bytes.NewReader(body))
		r, err = read(cl, func(string) {}, secret)
	} else {
		r, err = parse(body, secret)
	}
	if err != nil {
		// A 200 answer's error document or event may quote the request
		// as an error page does.
		return nil, c.hideSecrets(err)
	}
	c.done(ctx, cl, model, r, false)
	return r, nil
}

// idleConnsPerHost is the fewest idle connections a provider's client
// keeps to its endpoint: as many as calls commonly run at once.
const idleConnsPerHost = 16

// newTransport is a provider's own transport, keeping idle (at least
// idleConnsPerHost) idle connections to its endpoint.
func newTransport(idle int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(idle, idleConnsPerHost)
	t.MaxIdleConns = max(t.MaxIdleConns, t.MaxIdleConnsPerHost)
	return t
}
