package guard

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/opentalon/opentalon/core"
)

// BenchmarkPipeline64KBLatency runs the pipeline 2,000 times per
// iteration on an ordinary 64 KB result and reports p50/p99 of one run,
// as wall time and as the CPU time of the running thread (which leaves
// out the time other processes on a loaded machine took the CPU).
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
	wall := make([]time.Duration, 0, n)
	cpu := make([]time.Duration, 0, n)
	ctx := context.Background()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	for b.Loop() {
		wall, cpu = wall[:0], cpu[:0]
		for range n {
			start, c0 := time.Now(), threadCPU()
			if res := p.Run(ctx, call); res.Error != "" {
				b.Fatal(res.Error)
			}
			cpu = append(cpu, threadCPU()-c0)
			wall = append(wall, time.Since(start))
		}
	}
	slices.Sort(wall)
	slices.Sort(cpu)
	b.ReportMetric(float64(wall[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(wall[n*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu[n/2].Microseconds()), "p50-cpu-µs")
	b.ReportMetric(float64(cpu[n*99/100].Microseconds()), "p99-cpu-µs")
	b.ReportMetric(0, "ns/op")
}
