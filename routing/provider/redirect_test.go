package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestCrossHostRedirectIsRefused: a provider answering with a redirect to
// another host (here another port, which Go counts as the same host and
// so keeps even Authorization) gets no request there, so neither
// Authorization nor x-api-key leaves for it.
func TestCrossHostRedirectIsRefused(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization")+r.Header.Get("x-api-key"))
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	providers := map[string]Provider{
		"openai":    NewOpenAI(Options{ID: "oa", BaseURL: redirector.URL + "/v1"}),
		"anthropic": NewAnthropic(Options{ID: "an", BaseURL: redirector.URL}),
	}
	for name, p := range providers {
		req := &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}}
		_, err := p.Complete(context.Background(), Credentials{APIKey: "sk-secret"}, req)
		if err == nil {
			t.Fatalf("%s: a redirected call succeeded", name)
		}
		if !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), "base_url") || strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("%s: error %q; want it to name the redirect and base_url, without the key", name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("the redirect target received %d requests (credentials %q)", len(leaked), leaked)
	}
}

// TestSameHostRedirectIsFollowed: a redirect within the provider's own
// host (a moved path) still works.
func TestSameHostRedirectIsFollowed(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old/chat/completions" {
			http.Redirect(w, r, srv.URL+"/v1/chat/completions", http.StatusPermanentRedirect)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sk-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"message":{"content":"moved"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	p := NewOpenAI(Options{BaseURL: srv.URL + "/old"})
	resp, err := p.Complete(context.Background(), Credentials{APIKey: "sk-1"}, &Request{Model: "m", Messages: []core.ChatMessage{{Role: core.RoleUser, Content: "hi"}}})
	if err != nil || resp.Text != "moved" {
		t.Fatalf("same-host redirect: %v, %+v", err, resp)
	}
}
