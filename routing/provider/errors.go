package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// maxDetail bounds the provider's own error text carried in core.Error.Err.
const maxDetail = 300

// cutMark ends a text cut at maxDetail.
const cutMark = "…"

// apiError is the error a provider put in its body, in either API's shape:
// OpenAI {"error":{"message","type","code"}} (or {"error":"text"} from some
// compatible servers) and Anthropic {"type":"error","error":{"type","message"}}.
type apiError struct {
	Type, Code, Message string
}

func parseAPIError(body []byte) apiError {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		return apiError{Message: strings.TrimSpace(string(body))}
	}
	var text string
	if json.Unmarshal(env.Error, &text) == nil {
		return apiError{Message: text}
	}
	var e struct {
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"` // string, number or null
		Message string          `json:"message"`
	}
	if json.Unmarshal(env.Error, &e) != nil {
		return apiError{Message: string(env.Error)}
	}
	code := strings.Trim(string(e.Code), `"`)
	if code == "null" {
		code = ""
	}
	return apiError{Type: e.Type, Code: code, Message: e.Message}
}

func (e apiError) detail() string {
	var parts []string
	for _, s := range []string{e.Type, e.Code} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	d := e.Message
	if len(parts) > 0 {
		d = strings.Join(parts, "/") + ": " + d
	}
	return d
}

// Body phrases that decide a kind whatever the status says.
var (
	billingPhrases = []string{"insufficient_quota", "billing", "credit balance", "exceeded your current quota", "payment required"}
	contextPhrases = []string{"context_length_exceeded", "prompt is too long", "maximum context length", "context length", "context window", "exceed context limit"}
	// filterPhrases are a safety filter's refusal of the prompt (Azure
	// OpenAI's content_filter, OpenAI's content_policy_violation and
	// invalid_prompt "flagged as potentially violating our usage policy").
	filterPhrases = []string{"content_filter", "content_policy_violation", "content management policy", "flagged as potentially violating"}
)

// filtered says an error answer is a safety filter's refusal of the
// request: the user's content, not the model, the credential or the
// config, is what it refused.
func filtered(status int, e apiError) bool {
	return (status == 0 || status == 400 || status == 422) && containsAny(strings.ToLower(e.Type+" "+e.Code+" "+e.Message), filterPhrases)
}

// detailErr is the scrubbed detail of an error answer, with
// core.ErrFiltered in its chain for a safety filter's refusal.
func detailErr(status int, e apiError, secret string) error {
	d := scrub(e.detail(), secret)
	if filtered(status, e) {
		return fmt.Errorf("%w: %s", core.ErrFiltered, d)
	}
	return errors.New(d)
}

func containsAny(s string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// kindOf classifies an error answer by status and body. status 0 means an
// error event inside a stream, where only the body speaks.
func kindOf(status int, e apiError) core.Kind {
	text := strings.ToLower(e.Type + " " + e.Code + " " + e.Message)
	switch {
	case containsAny(text, billingPhrases) || e.Type == "billing_error":
		return core.KindBilling
	case e.Type == "overloaded_error":
		return core.KindUnavailable
	case filtered(status, e):
		return core.KindInvalid
	case (status == 0 || status == 400 || status == 413 || status == 422) && containsAny(text, contextPhrases):
		return core.KindContextTooLong
	}
	switch {
	case status == http.StatusTooManyRequests:
		return core.KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return core.KindAuth
	case status == http.StatusPaymentRequired:
		return core.KindBilling
	case status == http.StatusRequestTimeout:
		return core.KindTimeout
	case status == http.StatusRequestEntityTooLarge:
		return core.KindContextTooLong
	case status >= 500:
		return core.KindUnavailable
	case status >= 400:
		return core.KindBadRequest
	}
	// An error event in a stream: the Anthropic type says what it is.
	switch e.Type {
	case "rate_limit_error":
		return core.KindRateLimited
	case "authentication_error", "permission_error":
		return core.KindAuth
	case "api_error", "server_error", "timeout_error":
		return core.KindUnavailable
	case "request_too_large":
		return core.KindContextTooLong
	case "invalid_request_error", "not_found_error":
		return core.KindBadRequest
	}
	return core.KindUnavailable
}

// hint is the short, safe explanation of a kind with what to do about it.
func hint(id string, k core.Kind) string {
	switch k {
	case core.KindRateLimited:
		return "rate limited; retry later or add another auth profile"
	case core.KindAuth:
		return fmt.Sprintf("credential refused; check models.providers.%s.api_key or the auth profile", id)
	case core.KindBilling:
		return "quota or credit exhausted; add credit at the provider or use another profile"
	case core.KindUnavailable:
		return "provider unavailable or overloaded; retry later"
	case core.KindTimeout:
		return fmt.Sprintf("no answer in time; raise models.providers.%s.timeout", id)
	case core.KindContextTooLong:
		return "prompt too long for the model; start a new session (/new) or pick a model with a larger context_window"
	case core.KindBadRequest:
		return "request refused; check the model id in models.catalog and the request"
	case core.KindMalformed:
		return "unreadable answer from the provider"
	case core.KindInvalid:
		return "the user's message or the conversation was refused; nothing to change in the config"
	}
	return k.String()
}

// minScrubbed is the shortest API key scrub hides wherever it stands. A
// shorter one ("x", "none", "sk-1234") is hidden only where it stands as
// a word of its own: replacing every occurrence garbled every word that
// held it ("conte[redacted]t_length_e[redacted]ceeded").
const minScrubbed = 8

// scrub removes the secret from provider-supplied text and bounds it.
func scrub(s, secret string) string {
	switch {
	case len(secret) >= minScrubbed:
		s = strings.ReplaceAll(s, secret, "[redacted]")
	case secret != "":
		s = replaceWord(s, secret, "[redacted]")
	}
	if len(s) > maxDetail {
		s = s[:maxDetail] + cutMark
	}
	return s
}

// httpError turns an error answer into a *core.Error.
func httpError(id string, status int, h http.Header, body []byte, now time.Time, secret string) *core.Error {
	e := parseAPIError(body)
	k := kindOf(status, e)
	msg := fmt.Sprintf("provider %s: HTTP %d: %s", id, status, hint(id, k))
	ra := retryAfter(h, now)
	if ra > 0 {
		// Said to the second: an HTTP-date Retry-After is counted from
		// now to the nanosecond.
		msg += fmt.Sprintf(" (retry after %s)", max(ra.Round(time.Second), time.Second))
	}
	return &core.Error{Kind: k, Msg: msg, Err: detailErr(status, e, secret), RetryAfter: ra}
}

// streamError turns an error event received mid-stream into a *core.Error.
func streamError(id string, e apiError, secret string) *core.Error {
	k := kindOf(0, e)
	return &core.Error{Kind: k, Msg: fmt.Sprintf("provider %s: error in stream: %s", id, hint(id, k)), Err: detailErr(0, e, secret)}
}

// malformed reports an answer that could not be read.
func malformed(id, what string, err error, secret string) *core.Error {
	d := what
	if err != nil {
		d += ": " + err.Error()
	}
	return &core.Error{Kind: core.KindMalformed, Msg: fmt.Sprintf("provider %s: %s", id, hint(id, core.KindMalformed)), Err: errors.New(scrub(d, secret))}
}

// transportError classifies a failure to talk to the server at all (or a
// read that broke mid-answer). The caller's own cancellation is passed
// through unclassified, wrapped. caller is the caller's context, callCtx
// the one carrying the provider's timeout.
func transportError(caller, callCtx context.Context, id string, err error, secret string) error {
	if errors.Is(caller.Err(), context.Canceled) {
		return fmt.Errorf("provider %s: request canceled: %w", id, context.Canceled)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(callCtx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &core.Error{Kind: core.KindTimeout, Msg: fmt.Sprintf("provider %s: %s", id, hint(id, core.KindTimeout)), Err: errors.New(scrub(err.Error(), secret))}
	}
	return &core.Error{Kind: core.KindUnavailable,
		Msg: fmt.Sprintf("provider %s: cannot reach the server or the connection broke; check models.providers.%s.base_url and that the server is up", id, id),
		Err: errors.New(scrub(err.Error(), secret))}
}

// retryAfter reads retry-after-ms, then Retry-After in seconds or as an
// HTTP date; 0 when absent, unreadable or in the past.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// replaceWord replaces the occurrences of w in s that no letter, digit,
// '-' or '_' touches on either side.
func replaceWord(s, w, with string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, w)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(w)
		if (i == 0 || !keyByte(s[i-1])) && (end == len(s) || !keyByte(s[end])) {
			b.WriteString(s[:i])
			b.WriteString(with)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
}

// keyByte says c may be part of an API key.
func keyByte(c byte) bool {
	return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// hideSecrets removes the client's hide (the base URL's ?key= value and
// password, the extra headers' values) from err: a transport error quotes
// the URL the call went to, and a server's error page may quote the URL
// and the headers it was sent.
func (c *client) hideSecrets(err error) error { return HideSecrets(err, c.hide...) }

// HideSecrets returns err with each of secrets replaced by "[redacted]"
// in its text (one shorter than minScrubbed only where it stands as a
// word of its own, as scrub does). A *core.Error is changed in place (its
// kind and retry stay), its cause keeping its chain; another error is
// wrapped so that errors.Is and errors.As still see it. It is for an
// error that may quote a credential: a provider plugin's, which may quote
// the URL its vendor's SDK called, key and all.
func HideSecrets(err error, secrets ...string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	// Longest first: a secret that holds another is hidden whole, not
	// around the other's "[redacted]".
	secrets = slices.Clone(secrets)
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	if ce, ok := err.(*core.Error); ok {
		ce.Msg = hideAll(ce.Msg, secrets)
		if ce.Err != nil {
			ce.Err = hideErr(ce.Err, secrets)
		}
		return ce
	}
	return hideErr(err, secrets)
}

// hideAll replaces each of secrets in s with "[redacted]".
func hideAll(s string, secrets []string) string {
	for _, x := range secrets {
		switch {
		case len(x) >= minScrubbed:
			s = strings.ReplaceAll(s, x, "[redacted]")
		case x != "":
			s = replaceWord(s, x, "[redacted]")
		}
	}
	return hideCut(s, secrets)
}

// minCutPrefix is the shortest first part of a secret hideCut hides.
const minCutPrefix = 4

// hideCut hides the first part of a secret that ends s where scrub cut
// the text at maxDetail ("…"): s was cut before the secrets were hidden.
func hideCut(s string, secrets []string) string {
	body, ok := strings.CutSuffix(s, cutMark)
	if !ok {
		return s
	}
	for _, x := range secrets {
		if len(x) < minScrubbed {
			continue
		}
		for k := len(x) - 1; k >= minCutPrefix; k-- {
			if strings.HasSuffix(body, x[:k]) {
				body = body[:len(body)-k] + "[redacted]"
				break
			}
		}
	}
	return body + cutMark
}

// hideErr is err with secrets removed from its text; errors.Is and
// errors.As still see its chain.
func hideErr(err error, secrets []string) error {
	msg := err.Error()
	if clean := hideAll(msg, secrets); clean != msg {
		return &hiddenErr{msg: clean, err: err}
	}
	return err
}

type hiddenErr struct {
	msg string
	err error
}

func (e *hiddenErr) Error() string { return e.msg }
func (e *hiddenErr) Unwrap() error { return e.err }

// headerSecrets are the values of the extra headers (and the credential
// of a "Scheme credential" value) of at least minScrubbed bytes: shorter
// ones are hidden only where the API key is (scrub), not wherever they
// stand.
func headerSecrets(headers map[string]string) []string {
	var out []string
	for _, v := range headers {
		forms := []string{v}
		if f := strings.Fields(v); len(f) == 2 {
			forms = append(forms, f[1])
		}
		for _, x := range forms {
			if len(x) >= minScrubbed && !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out
}
