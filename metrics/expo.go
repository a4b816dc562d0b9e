package metrics

import (
	"bufio"
	"cmp"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The metrics are served in the Prometheus text exposition format
// (version 0.0.4), written here rather than with the Prometheus client
// library: the format is a few lines of text per series, and the
// library's package initialisation (its default registry and collectors,
// the regular expressions of procfs, the protobuf descriptors of its
// data model) cost every start of the binary about 2.5 ms and 0.55 MB,
// metrics served or not (issue 27). The tests read what is written here
// with the Prometheus parser (expfmt), so the format is checked by the
// library that defines it.

// contentType is the text format's media type.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// The metric types, as the TYPE line names them.
const (
	typeCounter   = "counter"
	typeGauge     = "gauge"
	typeHistogram = "histogram"
	typeSummary   = "summary"
)

// maxLabels is the most labels a counted series has (requests_total:
// channel, kind, outcome).
const maxLabels = 3

// labelKey is a series' label values, in its vector's label order; it is
// a map key without an allocation.
type labelKey [maxLabels]string

func keyOf(values []string) (k labelKey) {
	copy(k[:], values)
	return k
}

// vec holds the series of one metric by label values. Safe for
// concurrent use.
type vec[T any] struct {
	name, help string
	labels     []string
	fresh      func() *T // a new series, at 0
	mu         sync.RWMutex
	series     map[labelKey]*T
}

func newVec[T any](name, help string, labels []string, fresh func() *T) vec[T] {
	if len(labels) > maxLabels {
		panic("metrics: " + name + " has more than maxLabels labels")
	}
	return vec[T]{name: name, help: help, labels: labels, fresh: fresh, series: map[labelKey]*T{}}
}

// with is the series of the label values (one per label), made at 0 if
// new.
func (v *vec[T]) with(values ...string) *T {
	k := keyOf(values)
	v.mu.RLock()
	s, ok := v.series[k]
	v.mu.RUnlock()
	if ok {
		return s
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok = v.series[k]; !ok {
		s = v.fresh()
		v.series[k] = s
	}
	return s
}

// counterVec counts events by label values.
type counterVec struct{ vec[atomic.Uint64] }

func newCounterVec(name, help string, labels ...string) *counterVec {
	return &counterVec{newVec(name, help, labels, func() *atomic.Uint64 { return new(atomic.Uint64) })}
}

func (c *counterVec) inc(values ...string) { c.with(values...).Add(1) }

// collect adds the family with its series to s.
func (c *counterVec) collect(s *scrape) {
	f := s.family(c.name, c.help, typeCounter)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k, n := range c.series {
		f.add("", pairs(c.labels, k), float64(n.Load()))
	}
}

// histogram is one series of a histogramVec.
type histogram struct {
	counts []atomic.Uint64 // by bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

func (h *histogram) observe(bounds []float64, v float64) {
	h.counts[sort.SearchFloat64s(bounds, v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// histogramVec observes durations by label values.
type histogramVec struct {
	vec[histogram]
	bounds []float64 // the buckets' upper bounds, ascending, without +Inf
}

func newHistogramVec(name, help string, bounds []float64, labels ...string) *histogramVec {
	if !slices.IsSorted(bounds) {
		panic("metrics: " + name + ": buckets out of order")
	}
	fresh := func() *histogram { return &histogram{counts: make([]atomic.Uint64, len(bounds)+1)} }
	return &histogramVec{vec: newVec(name, help, labels, fresh), bounds: bounds}
}

func (h *histogramVec) collect(s *scrape) {
	f := s.family(h.name, h.help, typeHistogram)
	h.mu.RLock()
	defer h.mu.RUnlock()
	for k, series := range h.series {
		ls := pairs(h.labels, k)
		cum := uint64(0)
		for i, b := range h.bounds {
			cum += series.counts[i].Load()
			f.add("_bucket", append(ls[:len(ls):len(ls)], pair{"le", formatFloat(b)}), float64(cum))
		}
		cum += series.counts[len(h.bounds)].Load()
		// The count is the buckets' sum, so the lines agree even when an
		// observation races the scrape.
		f.add("_bucket", append(ls[:len(ls):len(ls)], pair{"le", "+Inf"}), float64(cum))
		f.add("_sum", ls, math.Float64frombits(series.sum.Load()))
		f.add("_count", ls, float64(cum))
	}
}

// pair is one label.
type pair struct{ name, value string }

// pairs pairs label names with a key's values.
func pairs(names []string, k labelKey) []pair {
	out := make([]pair, len(names))
	for i, n := range names {
		out[i] = pair{n, k[i]}
	}
	return out
}

// scrape gathers the families of one scrape and writes them.
type scrape struct {
	// constant labels every family added through it carries (the
	// replica's); write merges them in by name.
	constant []pair
	families map[string]*family
}

func newScrape() *scrape { return &scrape{families: map[string]*family{}} }

// with is a view of s whose families carry the constant labels too.
func (s *scrape) with(constant ...pair) *scrape {
	return &scrape{constant: constant, families: s.families}
}

// family is one metric name's help, type and samples (the name is its
// key in scrape.families).
type family struct {
	help, typ string
	constant  []pair
	samples   []sample
}

type sample struct {
	suffix string // "_bucket", "_sum", "_count" or ""
	labels []pair
	value  float64
}

// family is the family of name, added with help and typ if new.
func (s *scrape) family(name, help, typ string) *family {
	f, ok := s.families[name]
	if !ok {
		f = &family{help: help, typ: typ, constant: s.constant}
		s.families[name] = f
	}
	return f
}

// add adds a sample (labels in the family's label order; le last).
func (f *family) add(suffix string, labels []pair, v float64) {
	f.samples = append(f.samples, sample{suffix, labels, v})
}

// gauge and counter add a sample with labels given as name, value, ...
func (s *scrape) gauge(name, help string, v float64, labels ...string) {
	s.family(name, help, typeGauge).add("", labelPairs(labels), v)
}

func (s *scrape) counter(name, help string, v float64, labels ...string) {
	s.family(name, help, typeCounter).add("", labelPairs(labels), v)
}

func labelPairs(kv []string) []pair {
	out := make([]pair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, pair{kv[i], kv[i+1]})
	}
	return out
}

// write writes the families in the text format: families by name, the
// series of each by their labels, a histogram's lines in bucket order.
// A family with no sample is left out.
func (s *scrape) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	names := make([]string, 0, len(s.families))
	for n, f := range s.families {
		if len(f.samples) > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		f := s.families[n]
		for i := range f.samples {
			f.samples[i].labels = withConstant(f.samples[i].labels, f.constant)
		}
		slices.SortStableFunc(f.samples, func(a, b sample) int { return compareSeries(a.labels, b.labels) })
		bw.WriteString("# HELP ")
		bw.WriteString(n)
		bw.WriteByte(' ')
		bw.WriteString(escapeHelp(f.help))
		bw.WriteString("\n# TYPE ")
		bw.WriteString(n)
		bw.WriteByte(' ')
		bw.WriteString(f.typ)
		bw.WriteByte('\n')
		for i, smp := range f.samples {
			if i > 0 && isDuplicate(f.samples[i-1], smp) {
				continue // two sources gave the same series: the first stands
			}
			bw.WriteString(n)
			bw.WriteString(smp.suffix)
			if len(smp.labels) > 0 {
				bw.WriteByte('{')
				for i, l := range smp.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(l.name)
					bw.WriteString(`="`)
					bw.WriteString(escapeLabel(l.value))
					bw.WriteByte('"')
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(formatFloat(smp.value))
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// isDuplicate says b repeats a's series (adjacent once sorted); a
// histogram's or summary's lines differ by le or quantile.
func isDuplicate(a, b sample) bool {
	return a.suffix == b.suffix && slices.Equal(a.labels, b.labels)
}

// withConstant is labels with the constant ones merged in by name; le
// and quantile, which order a series' lines, stay last.
func withConstant(labels, constant []pair) []pair {
	if len(constant) == 0 {
		return labels
	}
	out := make([]pair, 0, len(labels)+len(constant))
	var last []pair
	for _, l := range labels {
		if l.name == "le" || l.name == "quantile" {
			last = append(last, l)
			continue
		}
		out = append(out, l)
	}
	out = append(out, constant...)
	slices.SortStableFunc(out, func(a, b pair) int { return strings.Compare(a.name, b.name) })
	return append(out, last...)
}

// compareSeries orders samples by their labels, le and quantile aside
// (so a series' lines keep the order they were added in).
func compareSeries(a, b []pair) int {
	a, b = seriesLabels(a), seriesLabels(b)
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := cmp.Or(strings.Compare(a[i].name, b[i].name), strings.Compare(a[i].value, b[i].value)); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// seriesLabels is labels without a trailing le or quantile.
func seriesLabels(labels []pair) []pair {
	if n := len(labels); n > 0 && (labels[n-1].name == "le" || labels[n-1].name == "quantile") {
		return labels[:n-1]
	}
	return labels
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(s string) string { return escape(s, false) }

// escapeLabel escapes a label value: backslash, line feed and double
// quote. Bytes that are not UTF-8 (a model name read from the database)
// become U+FFFD: Prometheus refuses a whole scrape over one of them.
func escapeLabel(s string) string { return escape(strings.ToValidUTF8(s, "\uFFFD"), true) }

func escape(s string, quote bool) string {
	if !strings.ContainsAny(s, "\\\n\"") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// formatFloat writes a value as the format does: the shortest exact
// decimal, and +Inf, -Inf, NaN.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
