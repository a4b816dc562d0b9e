package plugins

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/gateway"
)

// percentiles reports p50 and p99 of lat in µs.
func percentiles(b *testing.B, name string, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), name+"-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkHookPerMessage measures what one gRPC hook plugin adds to a
// message: its pre hook and its post hook through the pipeline's
// OrderedHooks (timeout, call to a real plugin process, sanitizer), over
// 5,000 messages per run, against the same pipeline with no hooks
// (go test -run '^$' -bench HookPerMessage -benchtime 1x ./plugins).
func BenchmarkHookPerMessage(b *testing.B) {
	p, err := Launch(context.Background(), helperSpec(b, "ext", "ext"), LaunchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	x := NewExtensions(ExtOptions{})
	x.Add(p.Cap, p.Conn())
	in := core.HookInput{In: core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "42"}, UserID: "42"},
		Text: "what is the capital of France? please answer in one short sentence"}
	for _, tc := range []struct {
		name  string
		hooks core.Hooks
	}{{"none", gateway.NewOrderedHooks(nil)}, {"grpc", gateway.NewOrderedHooks(nil, x)}} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 5000
			ctx := context.Background()
			lat := make([]time.Duration, 0, n)
			for b.Loop() {
				lat = lat[:0]
				for range n {
					t0 := time.Now()
					pre, err := tc.hooks.Pre(ctx, in)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := tc.hooks.Post(ctx, core.HookInput{In: in.In, Text: pre.Text, Metadata: pre.Metadata}, "Paris."); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
			}
			percentiles(b, "pre+post", lat)
		})
	}
}

// BenchmarkRouteRoundTrip measures one request to a plugin's HTTP route
// over loopback TCP: the route handler, the API key check, HandleHTTP
// over gRPC to a real plugin process and back, over 5,000 requests per
// run (go test -run '^$' -bench RouteRoundTrip -benchtime 1x ./plugins).
func BenchmarkRouteRoundTrip(b *testing.B) {
	p, err := Launch(context.Background(), helperSpec(b, "ext", "ext"), LaunchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	x := NewExtensions(ExtOptions{})
	x.Add(p.Cap, p.Conn())
	mux := http.NewServeMux()
	mux.Handle(RoutePattern, x.HTTPHandler(HTTPOptions{APIKey: "k"}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	const n = 5000
	lat := make([]time.Duration, 0, n)
	for b.Loop() {
		lat = lat[:0]
		for range n {
			req, _ := http.NewRequest("PUT", srv.URL+"/api/plugins/ext/files/a.txt", strings.NewReader(`{"hello":"world"}`))
			req.Header.Set("X-API-Key", "k")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	percentiles(b, "route", lat)
}
