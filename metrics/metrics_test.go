package metrics

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/opentalon/opentalon/core"
)

type fakeQueue struct {
	counts map[string]int
	oldest time.Time
	err    error
}

func (q fakeQueue) QueueCounts(context.Context) (map[string]int, error) { return q.counts, q.err }
func (q fakeQueue) OldestQueued(context.Context) (time.Time, error)     { return q.oldest, q.err }

// fakeLedger hands out its rows past the id asked for.
type fakeLedger struct {
	rows []core.UsageTotal // row i has id i+1, one call each
	asks []int64
}

func (l *fakeLedger) UsageByModelAfter(_ context.Context, after int64) ([]core.UsageTotal, int64, error) {
	l.asks = append(l.asks, after)
	var out []core.UsageTotal
	for i := int(after); i < len(l.rows); i++ {
		out = append(out, l.rows[i])
	}
	return out, int64(len(l.rows)), nil
}

// gather reads what m exposes with the Prometheus text parser.
func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	var b bytes.Buffer
	if err := m.Expose(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return parse(t, b.String())
}

// parse parses the text format with the Prometheus parser, which fails
// on what it does not accept.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the Prometheus parser refuses the exposition: %v\n%s", err, text)
	}
	return fams
}

func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i < len(labels); i += 2 {
			match := false
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !match {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no sample of %s with %v", name, labels)
	return 0
}

func TestScrapeTimeState(t *testing.T) {
	now := time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)
	led := &fakeLedger{rows: []core.UsageTotal{{Key: "p/a", Calls: 1, InputTokens: 10, OutputTokens: 5, CostUSD: 0.5}}}
	m := New(Options{
		Queue:  fakeQueue{counts: map[string]int{"queued": 3, "running": 1}, oldest: now.Add(-90 * time.Second)},
		Ledger: led,
		Channels: func() []ChannelStatus {
			return []ChannelStatus{{Name: "telegram", Up: true, LastEvent: now.Add(-7 * time.Second), Restarts: 2}, {Name: "console", Up: false}}
		},
		Profiles: func() []ProfileStatus {
			return []ProfileStatus{{Provider: "p", ID: "p:a", CooldownUntil: now.Add(time.Minute)}, {Provider: "p", ID: "p:b"}}
		},
		Now: func() time.Time { return now },
	})
	f := gather(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"opentalon_queue_depth", []string{"status", "queued"}, 3},
		{"opentalon_queue_depth", []string{"status", "running"}, 1},
		{"opentalon_queue_oldest_age_seconds", nil, 90},
		{"opentalon_llm_tokens_total", []string{"model", "p/a", "direction", "output"}, 5},
		{"opentalon_llm_cost_usd_total", []string{"model", "p/a"}, 0.5},
		{"opentalon_channel_up", []string{"channel", "telegram"}, 1},
		{"opentalon_channel_up", []string{"channel", "console"}, 0},
		{"opentalon_channel_last_event_age_seconds", []string{"channel", "telegram"}, 7},
		{"opentalon_channel_restarts_total", []string{"channel", "telegram"}, 2},
		{"opentalon_auth_profile_cooling", []string{"profile", "p:a"}, 1},
		{"opentalon_auth_profile_cooldown_seconds", []string{"profile", "p:a"}, 60},
		{"opentalon_auth_profile_cooling", []string{"profile", "p:b"}, 0},
	} {
		if got := find(t, f, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, m := range f["opentalon_channel_last_event_age_seconds"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "console" {
			t.Error("a channel that never got an event has an age")
		}
	}

	// The ledger is read incrementally and summed.
	led.rows = append(led.rows, core.UsageTotal{Key: "p/a", Calls: 1, InputTokens: 1, OutputTokens: 1, CostUSD: 0.25}, core.UsageTotal{Key: "p/b", Calls: 1, InputTokens: 2})
	f = gather(t, m)
	if got := find(t, f, "opentalon_llm_cost_usd_total", "model", "p/a"); got != 0.75 {
		t.Errorf("cost after two more rows = %v, want 0.75", got)
	}
	if got := find(t, f, "opentalon_llm_ledger_calls_total", "model", "p/b"); got != 1 {
		t.Errorf("p/b calls = %v", got)
	}
	if len(led.asks) != 2 || led.asks[1] != 1 {
		t.Errorf("ledger asked after %v; want 0, then 1", led.asks)
	}
}

func TestEventsAreCounted(t *testing.T) {
	m := New(Options{Queue: fakeQueue{err: errors.New("disk gone")}})
	m.Accepted("telegram")
	m.Finished("telegram", core.EventMessage, core.OutcomeAnswered)
	m.Finished("telegram", core.EventReaction, core.OutcomeAnswered)
	m.Stage("telegram", core.StageAgent, 2*time.Second)
	m.LLMCall("p/a", "p", "rate_limited", time.Second)
	m.Failover("p/a", "q/b")
	m.HookFailed("telegram", core.StagePreHooks)
	m.Removed("sanitized")
	m.ToolRan(time.Millisecond)
	for _, e := range []string{"registered", "deregistered", "registered", "registered"} {
		m.PluginEvent("calc", e)
	}
	m.PluginEvent("notes", "registered")
	m.PluginEvent("notes", "gave_up")
	// A failing source shows as a scrape error, not a panic; the rest is
	// served.
	var b bytes.Buffer
	if err := m.Expose(context.Background(), &b); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("gather with a failing queue: %v", err)
	}
	if f := parse(t, b.String()); f["opentalon_queue_depth"] != nil || f["opentalon_messages_accepted_total"] == nil {
		t.Errorf("with a failing queue: queue depth served %v, accepted served %v", f["opentalon_queue_depth"] != nil, f["opentalon_messages_accepted_total"] != nil)
	}
	m.o.Queue = nil
	f := gather(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"opentalon_messages_accepted_total", []string{"channel", "telegram"}, 1},
		{"opentalon_messages_answered_total", []string{"channel", "telegram"}, 1},
		{"opentalon_requests_total", []string{"kind", "reaction"}, 1},
		{"opentalon_stage_duration_seconds", []string{"stage", "agent"}, 1},
		{"opentalon_stage_duration_seconds", []string{"stage", "llm"}, 1},
		{"opentalon_stage_duration_seconds", []string{"stage", "tools"}, 1},
		{"opentalon_llm_calls_total", []string{"outcome", "rate_limited"}, 1},
		{"opentalon_llm_failovers_total", []string{"from", "p/a", "to", "q/b"}, 1},
		{"opentalon_hook_failures_total", []string{"stage", "pre_hooks"}, 1},
		{"opentalon_guard_removals_total", []string{"kind", "sanitized"}, 1},
		{"opentalon_plugin_restarts_total", []string{"plugin", "calc"}, 2},
		{"opentalon_plugin_up", []string{"plugin", "calc"}, 1},
		{"opentalon_plugin_up", []string{"plugin", "notes"}, 0},
	} {
		if got := find(t, f, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "# TYPE opentalon_stage_duration_seconds histogram") {
		t.Errorf("the handler does not serve the text format:\n%.500s", rec.Body.String())
	}
}

// TestKnownSeriesStartAtZero: the counters whose labels are known before
// their first event are served at 0, so a rate over them counts that
// event too.
func TestKnownSeriesStartAtZero(t *testing.T) {
	m := New(Options{Channels: func() []ChannelStatus { return []ChannelStatus{{Name: "telegram", Up: true}} }})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`opentalon_messages_accepted_total{channel="telegram"} 0`,
		`opentalon_messages_answered_total{channel="telegram"} 0`,
		`opentalon_hook_failures_total{stage="pre_hooks"} 0`,
		`opentalon_hook_failures_total{stage="post_hooks"} 0`,
		`opentalon_guard_removals_total{kind="truncated"} 0`,
		`opentalon_guard_removals_total{kind="sanitized"} 0`,
		`opentalon_guard_removals_total{kind="rejected"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics has no %s before any event:\n%s", want, body)
		}
	}
	m.Accepted("telegram")
	m.HookFailed("telegram", core.StagePreHooks)
	f := gather(t, m)
	if got := find(t, f, "opentalon_messages_accepted_total", "channel", "telegram"); got != 1 {
		t.Errorf("accepted after one message = %v, want 1", got)
	}
	if got := find(t, f, "opentalon_hook_failures_total", "stage", "pre_hooks"); got != 1 {
		t.Errorf("pre-hook failures after one = %v, want 1", got)
	}
}

// TestEveryMetricIsDocumented keeps docs/status.md's table complete.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m := New(Options{
		Queue:    fakeQueue{counts: map[string]int{}},
		Ledger:   &fakeLedger{rows: []core.UsageTotal{{Key: "p/a"}}},
		Channels: func() []ChannelStatus { return []ChannelStatus{{Name: "x", LastEvent: now}} },
		Profiles: func() []ProfileStatus { return []ProfileStatus{{Provider: "p", ID: "p:a"}} },
	})
	m.Accepted("x")
	m.Finished("x", core.EventMessage, core.OutcomeAnswered)
	m.Stage("x", core.StageAgent, time.Second)
	m.HookFailed("x", core.StagePostHooks)
	m.LLMCall("p/a", "p", "ok", time.Second)
	m.Failover("p/a", "p/a")
	m.Removed("truncated")
	m.PluginEvent("calc", "registered")
	m.PluginEvent("calc", "registered")
	n := 0
	for name := range gather(t, m) {
		short, ok := strings.CutPrefix(name, "opentalon_")
		if !ok {
			continue
		}
		n++
		if !strings.Contains(string(doc), "`"+short+"`") {
			t.Errorf("%s is not in docs/status.md's metrics table", name)
		}
	}
	if n < 20 {
		t.Errorf("only %d opentalon_ families gathered", n)
	}
}

// BenchmarkPerMessage is what the metrics add to one answered message:
// the observer calls the gateway, the router and the tool runner make.
func BenchmarkPerMessage(b *testing.B) {
	m := New(Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.Accepted("telegram")
		m.Stage("telegram", core.StageQueue, time.Millisecond)
		m.Stage("telegram", core.StagePreHooks, time.Microsecond)
		m.LLMCall("anthropic/claude-haiku-4-5", "anthropic", "ok", 800*time.Millisecond)
		m.ToolRan(20 * time.Millisecond)
		m.Stage("telegram", core.StageAgent, time.Second)
		m.Stage("telegram", core.StagePostHooks, time.Microsecond)
		m.Stage("telegram", core.StageDelivery, 30*time.Millisecond)
		m.Finished("telegram", core.EventMessage, core.OutcomeAnswered)
	}
}
