package provider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// A credential in base_url (?key= as Gemini takes it, user:password@ for
// a proxy) stays out of every error: the transport's, which quotes the
// URL, and a server's error page that quotes the request line. The error
// keeps its kind.
func TestBaseURLCredentialsStayOutOfErrors(t *testing.T) {
	const queryKey, password = "query-key-secret-1", "url-password-secret-2"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":"internal error serving %s %s"}}`, r.Method, r.URL.RequestURI())
	}))
	defer echo.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	withCreds := func(base string) string {
		return strings.Replace(base, "http://", "http://me:"+password+"@", 1) + "/v1?key=" + queryKey
	}
	for _, c := range []struct {
		name, base string
		kind       core.Kind
	}{
		{"error page quoting the URL", withCreds(echo.URL), core.KindUnavailable},
		{"connection refused", withCreds(closed), core.KindUnavailable},
	} {
		for api, p := range map[string]Provider{
			"openai":    NewOpenAI(Options{ID: "p", BaseURL: c.base}),
			"anthropic": NewAnthropic(Options{ID: "p", BaseURL: c.base}),
		} {
			req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
			_, err := p.Complete(context.Background(), Credentials{APIKey: "sk-secret-value"}, req)
			if err == nil {
				t.Fatalf("%s, %s: the call succeeded", c.name, api)
			}
			for _, s := range []string{queryKey, password, "sk-secret-value"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%s, %s: error %q shows %q", c.name, api, err, s)
				}
			}
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Kind != c.kind {
				t.Errorf("%s, %s: error %v; want kind %v", c.name, api, err, c.kind)
			}
		}
	}
}

// The extra headers are credentials too (models.providers.*.headers): a
// server's error page that quotes them must not carry them into the
// error, whole or as the token of a "Bearer token" value.
func TestHeaderCredentialsStayOutOfErrors(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"key %q and token %q are not valid here"}}`, r.Header.Get("Api-Key"), strings.TrimPrefix(r.Header.Get("X-Gateway-Auth"), "Bearer "))
	}))
	defer echo.Close()
	headers := map[string]string{"Api-Key": "azure-key-secret-3", "X-Gateway-Auth": "Bearer gateway-token-secret-4"}
	for api, p := range map[string]Provider{
		"openai":    NewOpenAI(Options{ID: "p", BaseURL: echo.URL + "/v1", Headers: headers}),
		"anthropic": NewAnthropic(Options{ID: "p", BaseURL: echo.URL, Headers: headers}),
	} {
		req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
		_, err := p.Complete(context.Background(), Credentials{}, req)
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Kind != core.KindAuth {
			t.Fatalf("%s: error %v; want an auth error", api, err)
		}
		for _, s := range []string{"azure-key-secret-3", "gateway-token-secret-4"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q shows %q", api, err, s)
			}
		}
	}
}

func TestHideSecrets(t *testing.T) {
	cause := errors.New(`Post "https://v.example/gen?key=long-secret-key": reset; key abc`)
	for _, c := range []struct {
		name    string
		err     error
		secrets []string
		want    string
	}{
		{"plain error, long key", cause, []string{"long-secret-key"}, `Post "https://v.example/gen?key=[redacted]": reset; key abc`},
		{"short key only as a word", errors.New("key abc in abcdef"), []string{"abc"}, "key [redacted] in abcdef"},
		{"core error keeps its kind", &core.Error{Kind: core.KindAuth, Msg: "provider p", Err: cause}, []string{"long-secret-key"},
			`provider p: Post "https://v.example/gen?key=[redacted]": reset; key abc`},
		{"nothing to hide", cause, nil, cause.Error()},
	} {
		got := HideSecrets(c.err, c.secrets...)
		if got.Error() != c.want {
			t.Errorf("%s: %q, want %q", c.name, got.Error(), c.want)
		}
		if !errors.Is(got, cause) && errors.Is(c.err, cause) {
			t.Errorf("%s: the chain is lost", c.name)
		}
		if ce, ok := c.err.(*core.Error); ok && core.ErrorKind(got) != ce.Kind {
			t.Errorf("%s: kind %v, want %v", c.name, core.ErrorKind(got), ce.Kind)
		}
	}
}

// A 200 answer may carry the error too: a JSON error document, or an
// error event in the middle of an event stream. When it quotes the
// request (the URL with its ?key=, the extra headers), the credentials
// stay out of the error as they do for an error status.
func TestCredentialsStayOutOfErrorsInA200Answer(t *testing.T) {
	const queryKey, header = "query-key-secret-5", "header-secret-6"
	for _, c := range []struct {
		name, ctype, body string
		stream            bool
	}{
		{"JSON error document", "application/json", `{"error":{"type":"server_error","message":"failed serving %s with %s"}}`, false},
		{"error event mid-stream", "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"error\":{\"type\":\"server_error\",\"message\":\"failed serving %s with %s\"}}\n\n", true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ctype)
			fmt.Fprintf(w, c.body, r.URL.RequestURI(), r.Header.Get("X-Auth"))
		}))
		p := NewOpenAI(Options{ID: "p", BaseURL: srv.URL + "/v1?key=" + queryKey, Headers: map[string]string{"X-Auth": header}})
		req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
		var err error
		if c.stream {
			_, err = p.Stream(context.Background(), Credentials{APIKey: "sk-secret-value"}, req, nil)
		} else {
			_, err = p.Complete(context.Background(), Credentials{APIKey: "sk-secret-value"}, req)
		}
		srv.Close()
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Kind != core.KindUnavailable {
			t.Fatalf("%s: error %v; want a server error", c.name, err)
		}
		if !strings.Contains(err.Error(), "failed serving") {
			t.Errorf("%s: error %q lost the server's message", c.name, err)
		}
		for _, s := range []string{queryKey, header} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q shows %q", c.name, err, s)
			}
		}
	}
}

// A base URL's user:password@ goes out as "Authorization: Basic
// base64(user:password)" when nothing else sets Authorization (Anthropic's
// key is x-api-key; an OpenAI-compatible proxy may take no key): an error
// page that quotes the headers must not carry that encoding of the
// password either.
func TestBasicAuthOfABaseURLPasswordStaysOutOfErrors(t *testing.T) {
	const password = "url-password-secret-7"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":"internal error serving %s with Authorization %q"}}`, r.URL.Path, r.Header.Get("Authorization"))
	}))
	defer echo.Close()
	base := strings.Replace(echo.URL, "http://", "http://me:"+password+"@", 1)
	basic := base64.StdEncoding.EncodeToString([]byte("me:" + password))
	for api, c := range map[string]struct {
		p    Provider
		cred Credentials
	}{
		"anthropic":      {NewAnthropic(Options{ID: "p", BaseURL: base}), Credentials{APIKey: "sk-secret-value"}},
		"openai, no key": {NewOpenAI(Options{ID: "p", BaseURL: base + "/v1"}), Credentials{}},
	} {
		req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
		_, err := c.p.Complete(context.Background(), c.cred, req)
		if err == nil || !strings.Contains(err.Error(), "Authorization") {
			t.Fatalf("%s: error %v; want the error page", api, err)
		}
		if strings.Contains(err.Error(), basic) {
			t.Errorf("%s: error %q shows the password as Basic auth", api, err)
		}
	}
}

// The provider's error text is cut at maxDetail bytes. A credential that
// straddles the cut must not leave its first part behind: the base URL's
// key and a header's value are hidden as the API key is, whole or cut.
func TestCredentialCutAtMaxDetailStaysOutOfErrors(t *testing.T) {
	const queryKey, header = "query-key-secret-8-abcdefghijklmnop", "header-secret-9-abcdefghijklmnopqrs"
	for _, c := range []struct{ name, secret string }{{"query key", queryKey}, {"header value", header}} {
		for cut := 4; cut < len(c.secret); cut += 7 {
			// The message puts the secret's first cut bytes at the end of
			// the maxDetail bytes kept ("server_error: " comes first).
			pad := strings.Repeat("x", maxDetail-len("server_error: ")-cut)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, `{"error":{"type":"server_error","message":"%s%s and more"}}`, pad, c.secret)
			}))
			p := NewOpenAI(Options{ID: "p", BaseURL: srv.URL + "/v1?key=" + queryKey, Headers: map[string]string{"X-Auth": header}})
			req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
			_, err := p.Complete(context.Background(), Credentials{}, req)
			srv.Close()
			if err == nil || !strings.Contains(err.Error(), pad) {
				t.Fatalf("%s cut at %d: error %v; want the server's message", c.name, cut, err)
			}
			if strings.Contains(err.Error(), c.secret[:cut]) {
				t.Errorf("%s cut at %d: error %q shows its first %d bytes", c.name, cut, err, cut)
			}
		}
	}
}

// One secret may hold another (a header whose value is a user's token
// and the key the base URL carries as well). The longer is hidden whole,
// whatever order the headers come in, so no part of it stays behind.
func TestASecretInsideAnotherIsHiddenWhole(t *testing.T) {
	const key, combined = "inner-key-secret-10", "outer-prefix-secret-11.inner-key-secret-10.outer-suffix-secret-12"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":"bad auth %q"}}`, r.Header.Get("X-Combined"))
	}))
	defer srv.Close()
	// Map order is random: many clients, so each order comes up.
	for i := range 32 {
		p := NewOpenAI(Options{ID: "p", BaseURL: srv.URL + "/v1", Headers: map[string]string{"X-Key": key, "X-Combined": combined, "X-Other": "other-value-secret-13"}})
		req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
		_, err := p.Complete(context.Background(), Credentials{}, req)
		if err == nil {
			t.Fatal("the call succeeded")
		}
		for _, s := range []string{"outer-prefix-secret-11", "outer-suffix-secret-12"} {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("client %d: error %q shows %q", i, err, s)
			}
		}
	}
}

// TestBaseURLQueryFollowsThePath: a base_url with a query (a key a server
// takes as ?key=) is called at its path plus the API's, with the query
// after the whole path; the path went into the query
// ("/v1?key=K/chat/completions"), so such a server could not be used.
func TestBaseURLQueryFollowsThePath(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path + " ? " + r.URL.RawQuery
		http.Error(w, `{"error":{"message":"stop here"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	for _, c := range []struct {
		api  string
		p    Provider
		want string
	}{
		{"openai", NewOpenAI(Options{ID: "p", BaseURL: srv.URL + "/v1/?key=K1&alt=x"}), "/v1/chat/completions ? key=K1&alt=x"},
		{"anthropic", NewAnthropic(Options{ID: "p", BaseURL: srv.URL + "/v1?key=K2"}), "/v1/messages ? key=K2"},
	} {
		req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
		p := c.p
		if _, err := p.Complete(context.Background(), Credentials{APIKey: "k"}, req); err == nil {
			t.Fatalf("%s: the call succeeded", c.api)
		}
		if g := <-got; g != c.want {
			t.Errorf("%s: called %q; want %q", c.api, g, c.want)
		}
	}
	for _, c := range []struct{ base, path, want string }{
		{"http://h/v1", "/models", "http://h/v1/models"},
		{"http://h/v1/", "/models", "http://h/v1/models"},
		{"http://h/v1?key=K", "/models", "http://h/v1/models?key=K"},
		{"http://h/v1/?key=K", "/models", "http://h/v1/models?key=K"},
	} {
		if g := JoinURL(c.base, c.path); g != c.want {
			t.Errorf("JoinURL(%q, %q) = %q; want %q", c.base, c.path, g, c.want)
		}
	}
	if g := AnthropicBase("http://h/v1/?key=K"); g != "http://h?key=K" {
		t.Errorf("AnthropicBase = %q; want the server with the query kept", g)
	}
}
