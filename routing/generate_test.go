package routing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestGenerateEndpoint drives POST /api/plugins/llm/generate against the
// real router and a fake LLM that counts in-flight requests: with the key
// it answers, without it 401, and concurrency never exceeds the router's
// local/cloud semaphores.
func TestGenerateEndpoint(t *testing.T) {
	const key = "plugin-api-key"
	tests := []struct {
		name  string
		local bool
		limit int
	}{
		{"cloud limit 2", false, 2},
		{"local limit 1", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := providertest.NewOpenAI(t)
			prov := provider.NewOpenAI(provider.Options{ID: "fake", BaseURL: llm.BaseURL()})
			router := newMemRouter(t, routing.Options{
				Providers: map[string]provider.Provider{"fake": prov},
				Catalog:   []routing.Model{{Ref: "fake/m", Alias: "small", Weight: 50, Local: tt.local}},
				MaxCloud:  2, MaxLocal: 1,
			})
			api := httptest.NewServer(plugins.NewGenerateHandler(router, plugins.Keys{Operator: key}, nil))
			defer api.Close()

			post := func(k string, body string) (int, plugins.GenerateResponse) {
				req, _ := http.NewRequest("POST", api.URL+plugins.GeneratePath, strings.NewReader(body))
				if k != "" {
					req.Header.Set("Authorization", "Bearer "+k)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return 0, plugins.GenerateResponse{}
				}
				defer resp.Body.Close()
				var out plugins.GenerateResponse
				json.NewDecoder(resp.Body).Decode(&out)
				return resp.StatusCode, out
			}
			body := func(s string) string {
				return fmt.Sprintf(`{"messages":[{"role":"system","content":"be terse"},{"role":"user","content":%q}],"llm_name":"small"}`, s)
			}

			if code, out := post(key, body("hello")); code != 200 || out.Text != "echo: hello" {
				t.Fatalf("with key: %d %+v", code, out)
			}
			if r, _ := llm.Last(); r.System != "be terse" {
				t.Fatalf("system prompt sent = %q", r.System)
			}
			if code, out := post("", body("hello")); code != 401 || out.Error == "" {
				t.Fatalf("without key: %d %+v", code, out)
			}
			before := llm.Count()
			if code, _ := post("wrong", body("hello")); code != 401 || llm.Count() != before {
				t.Fatalf("wrong key: %d, LLM called %d times", code, llm.Count()-before)
			}

			// Hold the fake LLM so requests pile up, fire many at once,
			// wait for the limit to be reached, then release.
			llm.Hold()
			const n = 8
			var wg sync.WaitGroup
			codes := make([]int, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i], _ = post(key, body(fmt.Sprint("q", i)))
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := llm.WaitRequests(ctx, before+tt.limit); err != nil {
				t.Fatal(err)
			}
			if got := llm.InFlight(); got != tt.limit {
				t.Fatalf("in flight while held = %d, want %d", got, tt.limit)
			}
			llm.Release()
			wg.Wait()
			for i, c := range codes {
				if c != 200 {
					t.Fatalf("request %d: status %d", i, c)
				}
			}
			if m := llm.MaxInFlight(); m != tt.limit {
				t.Fatalf("max in flight = %d, want exactly the limit %d", m, tt.limit)
			}
		})
	}
}

func newMemRouter(t *testing.T, o routing.Options) *routing.Router {
	t.Helper()
	o.Store = routing.NewMemStore()
	o.NoAffinity = true
	o.Seed = 1
	r, err := routing.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
