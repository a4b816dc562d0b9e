package status

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

type fakeStore struct {
	points []core.UsagePoint
	since  time.Time
	step   time.Duration
}

func (fakeStore) QueueCounts(context.Context) (map[string]int, error) {
	return map[string]int{"queued": 2, "failed": 1}, nil
}
func (fakeStore) OldestQueued(context.Context) (time.Time, error) {
	return time.Date(2025, 5, 1, 9, 59, 0, 0, time.UTC), nil
}
func (fakeStore) RecentFailures(context.Context, int) ([]core.QueueFailure, error) {
	return []core.QueueFailure{{ID: 7, Channel: "telegram", Kind: "message", Reason: "gave up"}}, nil
}
func (f *fakeStore) UsageSeries(_ context.Context, since time.Time, step time.Duration, _ string) ([]core.UsagePoint, error) {
	f.since, f.step = since, step
	return f.points, nil
}
func (fakeStore) Affinities(context.Context) ([]core.Affinity, error) {
	return []core.Affinity{{Task: "code", Model: "p/b", Pos: 1, Neg: 3, Positives: 1, Negatives: 3}, {Task: "chat", Model: "p/a", Pos: 2, Positives: 2}}, nil
}

func serve(p *Page, path string, header map[string]string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	p.Mount(mux)
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1:7070"
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

func TestAPIKeyUnlessLoopback(t *testing.T) {
	st := &fakeStore{}
	now := func() time.Time { return time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC) }
	open := New(Options{Store: st, Open: true, Now: now, Listen: "127.0.0.2:7070"})
	openKeyed := New(Options{Store: st, Open: true, APIKey: "s3cret", Now: now, Listen: "127.0.0.1:7070"})
	keyed := New(Options{Store: st, APIKey: "s3cret", Now: now})
	keyless := New(Options{Store: st, Now: now})
	for _, tc := range []struct {
		name   string
		p      *Page
		path   string
		header map[string]string
		code   int
		body   string
	}{
		{"loopback needs no key", open, "/api/status", nil, 200, `"queued":2`},
		// Issue 25, finding 10: without a key, only requests addressed to
		// this machine (DNS rebinding gives a web page's own name).
		{"localhost", open, "/api/status", map[string]string{"Host": "localhost:7070"}, 200, `"queued":2`},
		{"[::1]", open, "/api/status", map[string]string{"Host": "[::1]:7070"}, 200, `"queued":2`},
		{"the listen host", open, "/api/status", map[string]string{"Host": "127.0.0.2:7070"}, 200, `"queued":2`},
		{"a foreign Host", open, "/api/status", map[string]string{"Host": "attacker.example:7070"}, 403, "addressed to this machine"},
		{"a foreign Host with the key", openKeyed, "/api/status", map[string]string{"Host": "attacker.example:7070", "X-API-Key": "s3cret"}, 200, `"queued":2`},
		{"its own Origin", open, "/api/status", map[string]string{"Origin": "http://127.0.0.1:7070"}, 200, `"queued":2`},
		{"no key", keyed, "/api/status", nil, 401, "missing or wrong API key"},
		{"wrong key", keyed, "/api/affinity", map[string]string{"Authorization": "Bearer nope"}, 401, "missing or wrong API key"},
		{"bearer key", keyed, "/api/affinity", map[string]string{"Authorization": "Bearer s3cret"}, 200, `"tasks":["chat","code"]`},
		{"X-API-Key", keyed, "/api/usage", map[string]string{"X-API-Key": "s3cret"}, 200, `"step_seconds":3600`},
		{"beyond loopback without a key set", keyless, "/api/status", map[string]string{"Authorization": "Bearer "}, 403, "set server.api_key"},
		{"the page itself holds no data", keyed, "/", nil, 200, "<title>OpenTalon status</title>"},
		// The page itself on loopback answers only requests addressed to
		// this machine too, or ones with the key (docs/status.md).
		{"the page on loopback", open, "/", map[string]string{"Host": "localhost:7070"}, 200, "<title>OpenTalon status</title>"},
		{"the page for a foreign Host", open, "/", map[string]string{"Host": "attacker.example:7070"}, 403, "addressed to this machine"},
		{"its script for a foreign Host", open, "/ui/app.js", map[string]string{"Host": "attacker.example:7070"}, 403, "addressed to this machine"},
		{"the page for a foreign Host, a key set", openKeyed, "/", map[string]string{"Host": "attacker.example:7070"}, 403, "addressed to this machine"},
		{"the page for a foreign Host with the key", openKeyed, "/", map[string]string{"Host": "attacker.example:7070", "X-API-Key": "s3cret"}, 200, "<title>OpenTalon status</title>"},
		{"its script", keyed, "/ui/app.js", nil, 200, "/api/status"},
		{"an unknown asset", keyed, "/ui/nope.js", nil, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(tc.p, tc.path, tc.header)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("GET %s = %d %q; want %d with %q", tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
		})
	}
	// A call that changes something from another web page is refused
	// (the API has none yet; Protect guards what comes).
	changed := 0
	h := open.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { changed++ }))
	for origin, want := range map[string]int{"http://attacker.example:7070": 403, "http://localhost:7070": 200, "": 200} {
		req := httptest.NewRequest("POST", "/api/x", nil)
		req.Host = "127.0.0.1:7070"
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("POST from Origin %q = %d; want %d", origin, rec.Code, want)
		}
	}
	if changed != 2 {
		t.Errorf("the handler ran %d times; want 2", changed)
	}
	rec := serve(keyed, "/", map[string]string{"Accept-Encoding": "gzip"})
	if rec.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Errorf("index headers = %v", rec.Header())
	}
	if again := serve(keyed, "/", map[string]string{"If-None-Match": rec.Header().Get("ETag")}); again.Code != http.StatusNotModified {
		t.Errorf("revalidation = %d, want 304", again.Code)
	}
}

func TestUsageBuckets(t *testing.T) {
	now := time.Date(2025, 5, 1, 10, 30, 0, 0, time.UTC)
	st := &fakeStore{}
	p := New(Options{Store: st, Open: true, Now: func() time.Time { return now }})
	from := time.Date(2025, 4, 24, 12, 0, 0, 0, time.UTC) // 28 six-hour buckets, the last holding now
	st.points = []core.UsagePoint{
		{Bucket: from, Key: "p/a", Calls: 1, CostUSD: 0.5},
		{Bucket: from.Add(27 * 6 * time.Hour), Key: "", Calls: 2, InputTokens: 10},
		{Bucket: from.Add(27 * 6 * time.Hour), Key: "p/a", Calls: 1, CostUSD: 0.25},
	}
	rec := serve(p, "/api/usage?range=7d&by=channel", nil)
	var u Usage
	if err := json.Unmarshal(rec.Body.Bytes(), &u); err != nil {
		t.Fatalf("%v: %s", err, rec.Body.String())
	}
	if !st.since.Equal(from) || st.step != 6*time.Hour || len(u.Buckets) != 28 || !u.Buckets[27].Equal(time.Date(2025, 5, 1, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("since %v step %v buckets %d last %v", st.since, st.step, len(u.Buckets), u.Buckets[len(u.Buckets)-1])
	}
	if len(u.Series) != 2 || u.Series[0].Key != "(none)" || u.Series[0].Calls[27] != 2 || u.Series[1].CostUSD[0] != 0.5 || u.Series[1].CostUSD[27] != 0.25 {
		t.Fatalf("series = %+v", u.Series)
	}
	if rec := serve(p, "/api/usage?by=user", nil); rec.Code != 400 {
		t.Errorf("by=user = %d", rec.Code)
	}
}
