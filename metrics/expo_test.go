package metrics

import (
	"bytes"
	"context"
	"math"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestExpositionFormat: what is written is the text format the
// Prometheus parser reads back to the same values: label values with
// quotes, backslashes, line feeds and any UTF-8; help with a backslash
// and a line feed; cumulative histogram buckets; +Inf; the constant
// labels merged in name order with le last.
func TestExpositionFormat(t *testing.T) {
	odd := "a \"quoted\" back\\slash\nnew line, ünïcödé 🦅"
	c := newCounterVec("t_total", "help with a \\ and a\nline feed", "a", "b")
	c.inc(odd, "x")
	c.inc(odd, "x")
	c.inc("", "y")
	h := newHistogramVec("t_seconds", "h", []float64{0.5, 1, 2.5}, "stage")
	for _, v := range []float64{0.1, 0.5, 0.7, 3, 100} {
		h.with("llm").observe(h.bounds, v)
	}
	h.with("agent")

	s := newScrape()
	c.collect(s.with(pair{"replica", "r1"}))
	h.collect(s.with(pair{"a_first", "1"}, pair{"replica", "r1"}))
	s.gauge("t_inf", "inf", math.Inf(1))
	// Bytes that are not UTF-8, and a series two sources both gave.
	s.gauge("t_dup", "dup", 1, "x", "bad\xffname")
	s.gauge("t_dup", "dup", 2, "x", "bad\xffname")
	var b bytes.Buffer
	if err := s.write(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	f := parse(t, text)

	if got := find(t, f, "t_total", "a", odd, "b", "x", "replica", "r1"); got != 2 {
		t.Errorf("t_total{a=odd} = %v, want 2", got)
	}
	if got := find(t, f, "t_total", "a", "", "b", "y"); got != 1 {
		t.Errorf("t_total{a=\"\"} = %v, want 1", got)
	}
	if ms := f["t_dup"].GetMetric(); len(ms) != 1 || ms[0].GetGauge().GetValue() != 1 {
		t.Errorf("t_dup: %v; want the first of the two series only", ms)
	} else if v, _ := labelOf(ms[0], "x"); v != "bad\uFFFDname" {
		t.Errorf("t_dup's label %q; want the bad byte as U+FFFD", v)
	}
	if got := f["t_total"].GetHelp(); got != "help with a \\ and a\nline feed" {
		t.Errorf("help read back as %q", got)
	}
	if got := f["t_inf"].GetMetric()[0].GetGauge().GetValue(); !math.IsInf(got, 1) {
		t.Errorf("t_inf = %v, want +Inf", got)
	}
	var llm, agent bool
	for _, m := range f["t_seconds"].GetMetric() {
		hist := m.GetHistogram()
		stage, _ := labelOf(m, "stage")
		switch stage {
		case "llm":
			llm = true
			var cum []uint64
			for _, bk := range hist.GetBucket() {
				cum = append(cum, bk.GetCumulativeCount())
			}
			if !slices.Equal(cum, []uint64{2, 3, 3, 5}) || hist.GetSampleCount() != 5 || hist.GetSampleSum() != 104.3 {
				t.Errorf("llm histogram: buckets %v count %d sum %v; want [2 3 3 5], 5, 104.3", cum, hist.GetSampleCount(), hist.GetSampleSum())
			}
		case "agent":
			agent = true
			if hist.GetSampleCount() != 0 {
				t.Errorf("agent histogram count %d, want 0", hist.GetSampleCount())
			}
		}
		if r, _ := labelOf(m, "replica"); r != "r1" {
			t.Errorf("histogram series without replica=r1: %v", m)
		}
	}
	if !llm || !agent {
		t.Errorf("histogram series llm %v agent %v; want both:\n%s", llm, agent, text)
	}
	for _, want := range []string{
		`t_seconds_bucket{a_first="1",replica="r1",stage="llm",le="0.5"} 2` + "\n",
		`t_seconds_bucket{a_first="1",replica="r1",stage="llm",le="+Inf"} 5` + "\n",
		`t_seconds_count{a_first="1",replica="r1",stage="llm"} 5` + "\n",
		`# TYPE t_seconds histogram` + "\n",
		`# TYPE t_total counter` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no line %q in\n%s", want, text)
		}
	}
	// Families by name, the series of a histogram together and in order.
	if i, j := strings.Index(text, "# HELP t_inf"), strings.Index(text, "# HELP t_seconds"); i < 0 || j < i {
		t.Errorf("families not in name order:\n%s", text)
	}
	agentCount := strings.Index(text, `t_seconds_count{a_first="1",replica="r1",stage="agent"}`)
	llmFirst := strings.Index(text, `t_seconds_bucket{a_first="1",replica="r1",stage="llm",le="0.5"}`)
	if agentCount < 0 || llmFirst < agentCount {
		t.Errorf("histogram series interleaved or out of order:\n%s", text)
	}
}

// TestRuntimeSeries: the Go runtime's and the process's series have the
// names the Prometheus client's default collectors give them (what
// dashboards for Go programs read) and plausible values.
func TestRuntimeSeries(t *testing.T) {
	f := gather(t, New(Options{}))
	for _, name := range []string{
		"go_goroutines", "go_threads", "go_info", "go_sched_gomaxprocs_threads", "go_gc_duration_seconds",
		"go_gc_gogc_percent", "go_gc_gomemlimit_bytes",
		"go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total", "go_memstats_sys_bytes", "go_memstats_mallocs_total",
		"go_memstats_frees_total", "go_memstats_heap_alloc_bytes", "go_memstats_heap_sys_bytes", "go_memstats_heap_idle_bytes",
		"go_memstats_heap_inuse_bytes", "go_memstats_heap_released_bytes", "go_memstats_heap_objects",
		"go_memstats_stack_inuse_bytes", "go_memstats_stack_sys_bytes", "go_memstats_mspan_inuse_bytes",
		"go_memstats_mspan_sys_bytes", "go_memstats_mcache_inuse_bytes", "go_memstats_mcache_sys_bytes",
		"go_memstats_buck_hash_sys_bytes", "go_memstats_gc_sys_bytes", "go_memstats_other_sys_bytes",
		"go_memstats_next_gc_bytes", "go_memstats_last_gc_time_seconds",
	} {
		if _, ok := f[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if v := find(t, f, "go_goroutines"); v < 1 {
		t.Errorf("go_goroutines = %v", v)
	}
	if runtime.GOOS != "linux" {
		return // the process series are read from /proc
	}
	for _, name := range []string{
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
		"process_virtual_memory_max_bytes", "process_start_time_seconds", "process_open_fds", "process_max_fds",
		"process_network_receive_bytes_total", "process_network_transmit_bytes_total",
	} {
		if _, ok := f[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if v := find(t, f, "process_resident_memory_bytes"); v < 1<<20 || v > 1<<34 {
		t.Errorf("process_resident_memory_bytes = %v", v)
	}
	if v := find(t, f, "process_open_fds"); v < 3 {
		t.Errorf("process_open_fds = %v", v)
	}
	if start := find(t, f, "process_start_time_seconds"); math.Abs(start-float64(time.Now().Unix())) > 24*3600 {
		t.Errorf("process_start_time_seconds = %v, now %v", start, time.Now().Unix())
	}
	if v := f["go_gc_duration_seconds"].GetMetric()[0].GetSummary(); len(v.GetQuantile()) != 5 {
		t.Errorf("go_gc_duration_seconds quantiles %v", v.GetQuantile())
	}
}

// TestHandlerServesTheTextFormat: the media type Prometheus asks for,
// and a scrape whose database source fails still serves the rest.
func TestHandlerServesTheTextFormat(t *testing.T) {
	m := New(Options{Queue: fakeQueue{err: context.DeadlineExceeded}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if rec.Code != 200 {
		t.Errorf("status %d", rec.Code)
	}
	f := parse(t, rec.Body.String())
	if _, ok := f["go_goroutines"]; !ok {
		t.Error("no go_goroutines when the queue source fails")
	}
}

// BenchmarkScrape is one scrape of /metrics with a few series.
func BenchmarkScrape(b *testing.B) {
	m := New(Options{Channels: func() []ChannelStatus { return []ChannelStatus{{Name: "telegram", Up: true}} }})
	m.Accepted("telegram")
	m.Stage("telegram", "agent", time.Second)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := m.Expose(context.Background(), &buf); err != nil {
			b.Fatal(err)
		}
	}
}
