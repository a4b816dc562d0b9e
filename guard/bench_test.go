package guard

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// BenchmarkPipeline64KBLatency runs the pipeline 2,000 times per
// iteration on an ordinary 64 KB result and reports p50/p99 of one run.
func BenchmarkPipeline64KBLatency(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 64*1024-100 {
		sb.WriteString("line of ordinary plugin output with a number 12345 and ünïcödé; ")
	}
	content := sb.String()
	r := fakeResolver{"p.a": {Exec: echo(content)}}
	p := New(r, nil, nil)
	call := core.ToolCall{ID: "1", Plugin: "p", Action: "a"}
	const n = 2000
	lat := make([]time.Duration, 0, n)
	ctx := context.Background()
	for b.Loop() {
		lat = lat[:0]
		for range n {
			start := time.Now()
			if res := p.Run(ctx, call); res.Error != "" {
				b.Fatal(res.Error)
			}
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}
