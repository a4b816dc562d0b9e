package lua

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Per-invocation cost of seed 001's filter.lua and vocabulary_guard.lua
// on pooled states (go test -bench . -benchmem ./lua/).

func BenchmarkFilter(b *testing.B) {
	te := startEngine(b, map[string]string{"filter.lua": seed(b, "filter.lua")}, nil)
	in := input("could you summarize the release notes of last week for the team?")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res, err := te.Pre(ctx, in); err != nil || res.Drop {
			b.Fatal(res, err)
		}
	}
}

func BenchmarkVocabularyGuard(b *testing.B) {
	te := startEngine(b, map[string]string{"vocabulary_guard.lua": seed(b, "vocabulary_guard.lua")}, nil)
	in := input("q")
	answer := "Hi guys, the bug in the login form is fixed; we deploy asap. Honestly this sucks less now."
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := te.Post(ctx, in, answer); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryBombs reports how far past the budget the heap got
// before a table bomb and a string bomb were stopped (the memory limit,
// or the string limit for the string): the peak of the process heap
// (sampled every 100µs) above the heap at the run's start, in MiB, with
// memory_mb 64.
func BenchmarkMemoryBombs(b *testing.B) {
	for name, src := range map[string]string{
		"table":  `function pre_hook(ctx) local t = {} local i = 0 while true do i = i + 1 t[i] = {i, i} end end`,
		"string": `function pre_hook(ctx) local s = "x" while true do s = s .. s end end`,
	} {
		b.Run(name, func(b *testing.B) {
			te := startEngine(b, map[string]string{"bomb.lua": src}, func(o *Options) { o.Timeout = time.Minute })
			var worst float64
			for b.Loop() {
				runtime.GC()
				start := heapBytes()
				var peak atomic.Uint64
				peak.Store(start)
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					t := time.NewTicker(100 * time.Microsecond)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							if h := heapBytes(); h > peak.Load() {
								peak.Store(h)
							}
						}
					}
				}()
				_, err := te.RunHook(context.Background(), "bomb.lua", HookPre, input("x"), "x")
				close(stop)
				<-done
				if !errors.Is(err, ErrMemory) && !(name == "string" && err != nil && strings.Contains(err.Error(), "string limit")) {
					b.Fatalf("bomb ended with %v, want the memory limit", err)
				}
				worst = max(worst, float64(peak.Load()-start)/(1<<20))
			}
			b.ReportMetric(worst, "peak-MiB-over-start")
			b.ReportMetric(worst-64, "MiB-past-budget")
		})
	}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
