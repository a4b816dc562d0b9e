package provider

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

var clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type errCase struct {
	name   string
	status int
	header map[string]string
	body   string
	kind   core.Kind
	retry  time.Duration
	// streamOnly cases are raw SSE answers (status 200) and only make
	// sense for Stream; completeOnly cases are 200 JSON answers.
	streamOnly, completeOnly bool
}

// Error bodies as the real APIs send them.
func openAIErrorCases() []errCase {
	return []errCase{
		{name: "rate limit seconds", status: 429, header: map[string]string{"Retry-After": "20"},
			body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			kind: core.KindRateLimited, retry: 20 * time.Second},
		{name: "rate limit http date", status: 429, header: map[string]string{"Retry-After": clock.Add(30 * time.Second).Format(http.TimeFormat)},
			body: `{"error":{"message":"Rate limit reached","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			kind: core.KindRateLimited, retry: 30 * time.Second},
		{name: "rate limit retry-after-ms", status: 429, header: map[string]string{"retry-after-ms": "1500", "Retry-After": "2"},
			body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			kind: core.KindRateLimited, retry: 1500 * time.Millisecond},
		{name: "insufficient quota is billing", status: 429,
			body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			kind: core.KindBilling},
		{name: "bad key", status: 401,
			body: `{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			kind: core.KindAuth},
		{name: "forbidden region", status: 403,
			body: `{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`,
			kind: core.KindAuth},
		{name: "payment required", status: 402, body: `{"error":{"message":"Payment Required","type":"billing_error"}}`, kind: core.KindBilling},
		{name: "context length", status: 400,
			body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			kind: core.KindContextTooLong},
		{name: "vllm context length", status: 400,
			body: `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			kind: core.KindContextTooLong},
		{name: "bad request", status: 400,
			body: `{"error":{"message":"Invalid value for 'temperature': must be between 0 and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
			kind: core.KindBadRequest},
		{name: "unknown model", status: 404,
			body: `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			kind: core.KindBadRequest},
		// A safety filter's refusal of the prompt is the user's content:
		// no model, credential or config is to blame (core.ErrFiltered).
		{name: "azure content filter", status: 400,
			body: `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400}}`,
			kind: core.KindInvalid},
		{name: "prompt flagged", status: 400,
			body: `{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt.","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}`,
			kind: core.KindInvalid},
		{name: "ollama model missing", status: 404, body: `{"error":"model \"llama9\" not found, try pulling it first"}`, kind: core.KindBadRequest},
		{name: "unprocessable", status: 422, body: `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`, kind: core.KindBadRequest},
		{name: "server error", status: 500,
			body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			kind: core.KindUnavailable},
		{name: "bad gateway html", status: 502, body: `<html><body>502 Bad Gateway</body></html>`, kind: core.KindUnavailable},
		{name: "overloaded 503", status: 503, header: map[string]string{"Retry-After": "3"},
			body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`,
			kind: core.KindUnavailable, retry: 3 * time.Second},
		{name: "gateway timeout", status: 504, body: `upstream timed out`, kind: core.KindUnavailable},
		{name: "not json", body: `I am a teapot`, kind: core.KindMalformed, completeOnly: true},
		{name: "no choices", body: `{"id":"x","object":"chat.completion","choices":[]}`, kind: core.KindMalformed, completeOnly: true},
		{name: "bad tool args", body: `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"a__b","arguments":"{\"x\":"}}]},"finish_reason":"tool_calls"}]}`, kind: core.KindMalformed, completeOnly: true},
		{name: "error in a 200 body", body: `{"error":{"message":"model overloaded","type":"server_error"}}`, kind: core.KindUnavailable, completeOnly: true},
		{name: "stream cut short", body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"},\"finish_reason\":null}]}\n\n", kind: core.KindMalformed, streamOnly: true},
		{name: "stream bad chunk", body: "data: {\"choices\":[\n\ndata: [DONE]\n\n", kind: core.KindMalformed, streamOnly: true},
		{name: "stream empty", body: "data: [DONE]\n\n", kind: core.KindMalformed, streamOnly: true},
		{name: "stream error chunk", body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\"}}\n\n",
			kind: core.KindRateLimited, streamOnly: true},
	}
}

func anthropicErrorCases() []errCase {
	return []errCase{
		{name: "rate limit", status: 429, header: map[string]string{"retry-after": "15"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (abc) of 50 input tokens per minute."}}`,
			kind: core.KindRateLimited, retry: 15 * time.Second},
		{name: "rate limit http date", status: 429, header: map[string]string{"retry-after": clock.Add(90 * time.Second).Format(http.TimeFormat)},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			kind: core.KindRateLimited, retry: 90 * time.Second},
		{name: "overloaded 529", status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, kind: core.KindUnavailable},
		{name: "api error", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, kind: core.KindUnavailable},
		{name: "bad key", status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + testKey + `"}}`, kind: core.KindAuth},
		{name: "permission", status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`, kind: core.KindAuth},
		{name: "prompt too long", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210034 tokens > 200000 maximum"}}`, kind: core.KindContextTooLong},
		{name: "credit balance", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, kind: core.KindBilling},
		{name: "billing error type", status: 402, body: `{"type":"error","error":{"type":"billing_error","message":"Payment required"}}`, kind: core.KindBilling},
		{name: "bad request", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`, kind: core.KindBadRequest},
		{name: "not found", status: 404, body: `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`, kind: core.KindBadRequest},
		{name: "too large", status: 413, body: `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, kind: core.KindContextTooLong},
		{name: "not json", body: `<html>oops</html>`, kind: core.KindMalformed, completeOnly: true},
		{name: "not a message", body: `{"hello":"world"}`, kind: core.KindMalformed, completeOnly: true},
		{name: "error in a 200 body", body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, kind: core.KindUnavailable, completeOnly: true},
		{name: "stream overloaded event", kind: core.KindUnavailable, streamOnly: true,
			body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"},
		{name: "stream rate limit event", kind: core.KindRateLimited, streamOnly: true,
			body: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n"},
		{name: "stream cut short", kind: core.KindMalformed, streamOnly: true,
			body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"},
		{name: "stream bad json", kind: core.KindMalformed, streamOnly: true, body: "event: message_start\ndata: {nope\n\n"},
		{name: "stream bad tool args", kind: core.KindMalformed, streamOnly: true,
			body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"a__b\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"x\\\":\"}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	}
}

func TestErrorKinds(t *testing.T) {
	tables := map[string][]errCase{"openai": openAIErrorCases(), "anthropic": anthropicErrorCases()}
	each(t, func(t *testing.T, f flavor, m mode) {
		for _, tc := range tables[f.name] {
			if (tc.streamOnly && !m.stream) || (tc.completeOnly && m.stream) {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				s, p := setup(t, f, Options{ID: "acme", Now: func() time.Time { return clock }})
				s.Enqueue(providertest.Script{Status: tc.status, Header: tc.header, Body: tc.body})
				r, _, err := run(context.Background(), p, m, Credentials{APIKey: testKey}, &Request{Model: "m"})
				if err == nil {
					t.Fatalf("no error; response %+v", r)
				}
				var ce *core.Error
				if !errors.As(err, &ce) {
					t.Fatalf("not a *core.Error: %T %v", err, err)
				}
				if ce.Kind != tc.kind {
					t.Fatalf("kind %v, want %v (%v)", ce.Kind, tc.kind, err)
				}
				if errors.Is(err, core.ErrFiltered) != (tc.kind == core.KindInvalid) {
					t.Fatalf("errors.Is(%v, core.ErrFiltered) = %v; want it for a safety filter's refusal only", err, !(tc.kind == core.KindInvalid))
				}
				if ce.RetryAfter != tc.retry {
					t.Fatalf("retry after %v, want %v", ce.RetryAfter, tc.retry)
				}
				if strings.Contains(err.Error(), testKey) || strings.Contains(ce.Msg, testKey) {
					t.Fatalf("key leaked: %v", err)
				}
				if !strings.Contains(ce.Msg, "acme") {
					t.Fatalf("Msg %q does not name the provider", ce.Msg)
				}
				if tc.status != 0 && !strings.Contains(ce.Msg, "HTTP "+strconv.Itoa(tc.status)) {
					t.Fatalf("Msg %q does not name the status", ce.Msg)
				}
				if ce.Err == nil || len(ce.Err.Error()) > maxDetail+10 {
					t.Fatalf("detail %v", ce.Err)
				}
			})
		}
	})
}

func TestRetryAfter(t *testing.T) {
	cases := []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"date", map[string]string{"Retry-After": clock.Add(time.Minute).Format(http.TimeFormat)}, time.Minute},
		{"date in the past", map[string]string{"Retry-After": clock.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"ms wins", map[string]string{"retry-after-ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{"bad ms falls back", map[string]string{"retry-after-ms": "soon", "Retry-After": "9"}, 9 * time.Second},
		{"garbage", map[string]string{"Retry-After": "later"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, clock); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestScrubTruncates(t *testing.T) {
	long := strings.Repeat("x", 1000) + testKey
	got := scrub(testKey+" "+long, testKey)
	if strings.Contains(got, testKey) || !strings.HasPrefix(got, "[redacted] ") || len(got) > maxDetail+4 {
		t.Fatalf("scrub gave %q", got)
	}
}

// TestScrubShortKeys: a key of a few characters is hidden where it
// stands as a word of its own, not inside other words, which it would
// garble; a long one is hidden wherever it stands.
func TestScrubShortKeys(t *testing.T) {
	for _, tc := range []struct{ in, key, want string }{
		{`{"code":"context_length_exceeded"}`, "x", `{"code":"context_length_exceeded"}`},
		{`the model "none" is unknown`, "none", `the model "[redacted]" is unknown`},
		{`invalid key: sk-1234.`, "sk-1234", `invalid key: [redacted].`},
		{`key=sk-1234 and sk-12345`, "sk-1234", `key=[redacted] and sk-12345`},
		{`Bearer sk-1234`, "sk-1234", `Bearer [redacted]`},
		{"key sk-local-1 refused (xsk-local-1x)", "sk-local-1", "key [redacted] refused (x[redacted]x)"},
	} {
		if got := scrub(tc.in, tc.key); got != tc.want {
			t.Errorf("scrub(%q, %q) = %q, want %q", tc.in, tc.key, got, tc.want)
		}
	}
}

// An HTTP-date Retry-After read at a clock with nanoseconds is said to
// the second in the error's text.
func TestRetryAfterSaidToTheSecond(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 173273737, time.UTC)
	h := http.Header{"Retry-After": []string{now.Add(5 * time.Minute).Format(http.TimeFormat)}}
	e := httpError("p", 429, h, []byte(`{"error":{"message":"slow down"}}`), now, "")
	if !strings.Contains(e.Msg, "(retry after 5m0s)") {
		t.Fatalf("message %q; want the wait to the second, (retry after 5m0s)", e.Msg)
	}
}
