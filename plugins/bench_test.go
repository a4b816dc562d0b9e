package plugins

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// BenchmarkExecuteRoundTrip measures one Execute call over the unix
// socket to a real plugin process and reports p50/p99 over 10,000 calls
// per run (go test -bench ExecuteRoundTrip -benchtime 1x ./plugins).
func BenchmarkExecuteRoundTrip(b *testing.B) {
	benchmarkRoundTrip(b, nil)
}

// BenchmarkExecuteRoundTripIsolated is the same with the plugin under
// Landlock (where the kernel has it), no_new_privs and resource limits.
func BenchmarkExecuteRoundTripIsolated(b *testing.B) {
	sb := Sandbox{Landlock: true, Limits: ProcessLimits{AddressSpace: 4 << 30, OpenFiles: 1024}}
	if os.Geteuid() == 0 {
		sb.RunAs = "root" // the test binary is not reachable by another user
	}
	iso, err := NewIsolation(sb)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkRoundTrip(b, iso)
}

func benchmarkRoundTrip(b *testing.B, iso *Isolation) {
	p, err := Launch(context.Background(), helperSpec(b, "evil", "bench"), LaunchOptions{Isolation: iso})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	exec := p.Executor()
	call := core.ToolCall{ID: "1", Plugin: "bench", Action: "echo", Args: map[string]string{"text": "hello"}}
	const n = 10_000
	lat := make([]time.Duration, 0, n)
	ctx := context.Background()
	for b.Loop() {
		lat = lat[:0]
		for range n {
			start := time.Now()
			if _, err := exec.Execute(ctx, call); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}
