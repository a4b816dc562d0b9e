package metrics

import (
	"runtime"
	"runtime/debug"
	rm "runtime/metrics"
	"time"
)

// collectRuntime adds the Go runtime's series, under the names the
// Prometheus client's Go collector gives them, so dashboards made for
// any Go program work.
func collectRuntime(s *scrape) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g := func(name, help string, v float64) { s.gauge(name, help, v) }
	c := func(name, help string, v float64) { s.counter(name, help, v) }
	g("go_goroutines", "Goroutines that currently exist.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	g("go_threads", "OS threads created.", float64(threads))
	g("go_sched_gomaxprocs_threads", "GOMAXPROCS: the OS threads that may run Go code at once.", float64(runtime.GOMAXPROCS(0)))
	s.gauge("go_info", "The Go version the binary was built with.", 1, "version", runtime.Version())

	g("go_memstats_alloc_bytes", "Heap bytes allocated and still in use.", float64(ms.Alloc))
	c("go_memstats_alloc_bytes_total", "Heap bytes allocated, freed or not.", float64(ms.TotalAlloc))
	g("go_memstats_sys_bytes", "Bytes obtained from the OS.", float64(ms.Sys))
	c("go_memstats_mallocs_total", "Heap objects allocated.", float64(ms.Mallocs))
	c("go_memstats_frees_total", "Heap objects freed.", float64(ms.Frees))
	g("go_memstats_heap_alloc_bytes", "Heap bytes allocated and still in use.", float64(ms.HeapAlloc))
	g("go_memstats_heap_sys_bytes", "Heap bytes obtained from the OS.", float64(ms.HeapSys))
	g("go_memstats_heap_idle_bytes", "Heap bytes in spans with no object.", float64(ms.HeapIdle))
	g("go_memstats_heap_inuse_bytes", "Heap bytes in spans with at least one object.", float64(ms.HeapInuse))
	g("go_memstats_heap_released_bytes", "Heap bytes returned to the OS.", float64(ms.HeapReleased))
	g("go_memstats_heap_objects", "Heap objects allocated and still in use.", float64(ms.HeapObjects))
	g("go_memstats_stack_inuse_bytes", "Bytes of goroutine stacks in use.", float64(ms.StackInuse))
	g("go_memstats_stack_sys_bytes", "Bytes obtained from the OS for goroutine stacks.", float64(ms.StackSys))
	g("go_memstats_mspan_inuse_bytes", "Bytes of the allocator's span structures in use.", float64(ms.MSpanInuse))
	g("go_memstats_mspan_sys_bytes", "Bytes obtained from the OS for span structures.", float64(ms.MSpanSys))
	g("go_memstats_mcache_inuse_bytes", "Bytes of the allocator's per-P caches in use.", float64(ms.MCacheInuse))
	g("go_memstats_mcache_sys_bytes", "Bytes obtained from the OS for per-P caches.", float64(ms.MCacheSys))
	g("go_memstats_buck_hash_sys_bytes", "Bytes of the profiling bucket hash table.", float64(ms.BuckHashSys))
	g("go_memstats_gc_sys_bytes", "Bytes of garbage collection metadata.", float64(ms.GCSys))
	g("go_memstats_other_sys_bytes", "Bytes of other runtime allocations.", float64(ms.OtherSys))
	g("go_memstats_next_gc_bytes", "Heap size at which the next collection starts.", float64(ms.NextGC))
	g("go_memstats_last_gc_time_seconds", "When the last collection ended, in seconds since the epoch (0 before the first).",
		float64(ms.LastGC)/float64(time.Second))

	// The collections' pauses: quantiles of the recent ones, with the sum
	// and count of all.
	var st debug.GCStats
	st.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&st)
	f := s.family("go_gc_duration_seconds", "Stop-the-world pauses of the garbage collector.", typeSummary)
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		f.add("", []pair{{"quantile", q}}, st.PauseQuantiles[i].Seconds())
	}
	f.add("_sum", nil, st.PauseTotal.Seconds())
	f.add("_count", nil, float64(st.NumGC))

	samples := []rm.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	rm.Read(samples)
	if samples[0].Value.Kind() == rm.KindUint64 {
		g("go_gc_gogc_percent", "GOGC: the heap growth, in percent, that starts a collection.", float64(samples[0].Value.Uint64()))
	}
	if samples[1].Value.Kind() == rm.KindUint64 {
		g("go_gc_gomemlimit_bytes", "GOMEMLIMIT: the soft memory limit, in bytes.", float64(samples[1].Value.Uint64()))
	}
	collectProcess(s)
}
