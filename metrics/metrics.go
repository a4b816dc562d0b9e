package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Queue is what the metrics read of the durable queue when scraped
// (store.DB).
type Queue interface {
	// QueueCounts counts queue rows by status.
	QueueCounts(ctx context.Context) (map[string]int, error)
	// OldestQueued is when the oldest queued row was accepted (zero when
	// nothing is queued).
	OldestQueued(ctx context.Context) (time.Time, error)
}

// Ledger is what the metrics read of the usage ledger (store.DB).
type Ledger interface {
	// UsageByModelAfter sums, by model, the ledger rows after row id
	// after; last is the highest row id summed (after when none).
	UsageByModelAfter(ctx context.Context, after int64) (rows []core.UsageTotal, last int64, err error)
}

// ChannelStatus is a channel's liveness when scraped.
type ChannelStatus struct {
	Name string
	// Up says the channel runs and its platform connection works.
	Up bool
	// LastEvent is when the platform last delivered anything (zero =
	// never, or the channel does not say).
	LastEvent time.Time
	Restarts  int
}

// ProfileStatus is an auth profile's cooldown when scraped.
type ProfileStatus struct {
	Provider, ID  string
	CooldownUntil time.Time
}

// Options configure New. Every source is optional.
type Options struct {
	Queue    Queue
	Ledger   Ledger
	Channels func() []ChannelStatus
	Profiles func() []ProfileStatus
	// Replica, when set (replicas over one database), labels every
	// series this process counts or knows alone (requests, stages, LLM
	// calls, channels, plugins, the Go runtime) with replica=<id>; the
	// series read from the database (queue, ledger, cooldowns) carry no
	// such label and are exported only while Exports says so (the replica
	// holding the maintenance lease), so a sum over replicas counts them
	// once.
	Replica string
	// Exports says whether this replica exports the series read from the
	// database (nil = always: the only process).
	Exports func() bool
	// Now is the clock of ages and cooldowns (default time.Now).
	Now func() time.Time
	// Logger gets the errors of a scrape (a source that failed); the
	// rest of the metrics are served all the same.
	Logger *slog.Logger
}

// Metrics holds every metric. Its methods are safe for concurrent use.
// It implements core.Observer, routing.Observer and guard.Observer.
type Metrics struct {
	o Options

	accepted     *counterVec
	answered     *counterVec
	requests     *counterVec
	stages       *histogramVec
	hookFailures *counterVec
	llmCalls     *counterVec
	failovers    *counterVec
	removals     *counterVec
	restarts     *counterVec

	// ledger is the usage ledger's sums, read incrementally.
	ledger ledgerSums

	pluginMu sync.Mutex
	// pluginSeen counts the registrations of each plugin (the first is
	// no restart); pluginUp says it is registered now.
	pluginSeen map[string]int
	pluginUp   map[string]bool
}

// stageBuckets span a fast SQLite hop (1 ms) to a slow LLM answer (2 min).
var stageBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// New makes every metric.
func New(o Options) *Metrics {
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Metrics{o: o, pluginSeen: map[string]int{}, pluginUp: map[string]bool{}}
	m.accepted = newCounterVec("opentalon_messages_accepted_total", "Messages committed to the queue, by channel.", "channel")
	m.answered = newCounterVec("opentalon_messages_answered_total", "Messages answered (their reply sent), by channel.", "channel")
	m.requests = newCounterVec("opentalon_requests_total", "Attempts at queued events by outcome: answered, dropped (pre-hook), released (shutdown), waiting (cooling provider), retried, failed; and messages refused at intake (access; not queued).", "channel", "kind", "outcome")
	m.hookFailures = newCounterVec("opentalon_hook_failures_total", "Pre- and post-hook runs (Lua scripts, hook plugins) that failed (an error, a timeout, output that is not text) and were skipped, by stage.", "stage")
	m.llmCalls = newCounterVec("opentalon_llm_calls_total", "LLM call attempts by model, provider and outcome (ok or the failure's kind).", "model", "provider", "outcome")
	m.failovers = newCounterVec("opentalon_llm_failovers_total", "Moves to another credential or model after a failed LLM call attempt.", "from", "to")
	m.removals = newCounterVec("opentalon_guard_removals_total", "What the guard removed from plugin results, by kind: truncated, sanitized, rejected.", "kind")
	m.restarts = newCounterVec("opentalon_plugin_restarts_total", "Tool plugin processes registered again after they stopped.", "plugin")
	m.stages = newHistogramVec("opentalon_stage_duration_seconds",
		"How long each stage of a request took: queue (accepted to first claim), pre_hooks, agent (LLM and tools), llm (one call attempt), tools (one tool run), post_hooks, delivery (pacing included).",
		stageBuckets, "stage")
	// The series whose labels are known from the start exist from the
	// start, at 0: a rate or an increase over them then counts their
	// first event too, and an alert on them has a series to read. The
	// channels' are made when /metrics is served (see Handler).
	for _, s := range []core.Stage{core.StagePreHooks, core.StagePostHooks} {
		m.hookFailures.with(string(s))
	}
	for _, k := range []string{"truncated", "sanitized", "rejected"} {
		m.removals.with(k)
	}
	return m
}

// Handler serves the metrics in the Prometheus text format. Each
// channel's message counters are there, at 0, before its first message.
// A source that fails (the database) is logged and its series left out
// (the ledger's totals stay as last read); the rest are served all the
// same.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		if err := m.Expose(r.Context(), &body); err != nil && m.o.Logger != nil {
			m.o.Logger.Warn("a metrics source failed; its series are stale or left out of this scrape", "component", "metrics", "err", err)
		}
		w.Header().Set("Content-Type", contentType)
		w.Write(body.Bytes())
	})
}

// Expose writes every metric in the Prometheus text format to w. The
// error joins those of the sources that failed (their series are left
// out, or stale: the ledger's) and w's.
func (m *Metrics) Expose(ctx context.Context, w io.Writer) error {
	m.knowChannels()
	all := newScrape()
	// Per-process series carry the replica's label in a cluster.
	proc := all
	if m.o.Replica != "" {
		proc = all.with(pair{"replica", m.o.Replica})
	}
	for _, c := range []*counterVec{m.accepted, m.answered, m.requests, m.hookFailures, m.llmCalls, m.failovers, m.removals, m.restarts} {
		c.collect(proc)
	}
	m.stages.collect(proc)
	m.collectProcessState(proc)
	collectRuntime(proc)
	err := m.collectDatabase(ctx, all)
	return errors.Join(err, all.write(w))
}

// knowChannels makes the message counters of every channel that runs.
func (m *Metrics) knowChannels() {
	if m.o.Channels == nil {
		return
	}
	for _, c := range m.o.Channels() {
		m.accepted.with(c.Name)
		m.answered.with(c.Name)
	}
}

func (m *Metrics) observeStage(stage string, d time.Duration) {
	m.stages.with(stage).observe(m.stages.bounds, d.Seconds())
}

// Accepted implements core.Observer.
func (m *Metrics) Accepted(channel string) { m.accepted.inc(channel) }

// Stage implements core.Observer.
func (m *Metrics) Stage(_ string, s core.Stage, d time.Duration) { m.observeStage(string(s), d) }

// Finished implements core.Observer.
func (m *Metrics) Finished(channel string, kind core.EventKind, o core.Outcome) {
	m.requests.inc(channel, string(kind), string(o))
	if kind == core.EventMessage && o == core.OutcomeAnswered {
		m.answered.inc(channel)
	}
}

// HookFailed implements core.Observer.
func (m *Metrics) HookFailed(_ string, s core.Stage) { m.hookFailures.inc(string(s)) }

// LLMCall implements routing.Observer.
func (m *Metrics) LLMCall(model, provider, outcome string, d time.Duration) {
	m.llmCalls.inc(model, provider, outcome)
	m.observeStage("llm", d)
}

// Failover implements routing.Observer.
func (m *Metrics) Failover(from, to string) { m.failovers.inc(from, to) }

// Removed implements guard.Observer.
func (m *Metrics) Removed(kind string) { m.removals.inc(kind) }

// ToolRan records one tool run's duration (stage "tools").
func (m *Metrics) ToolRan(d time.Duration) { m.observeStage("tools", d) }

// PluginEvent is the plugin manager's OnEvent: "registered",
// "deregistered" or "gave_up" for a plugin. A registration after the
// first is a restart.
func (m *Metrics) PluginEvent(plugin, event string) {
	m.pluginMu.Lock()
	defer m.pluginMu.Unlock()
	switch event {
	case "registered":
		if m.pluginSeen[plugin] > 0 {
			m.restarts.inc(plugin)
		}
		m.pluginSeen[plugin]++
		m.pluginUp[plugin] = true
	case "deregistered", "gave_up":
		m.pluginUp[plugin] = false
	}
}

// PluginHealth reports, by plugin name, whether it is registered now and
// how often it was restarted.
func (m *Metrics) PluginHealth() map[string]PluginState {
	m.pluginMu.Lock()
	defer m.pluginMu.Unlock()
	out := make(map[string]PluginState, len(m.pluginSeen))
	for name, n := range m.pluginSeen {
		out[name] = PluginState{Up: m.pluginUp[name], Restarts: max(n-1, 0)}
	}
	return out
}

// PluginState is a plugin's health as the manager's events tell it.
type PluginState struct {
	Up       bool
	Restarts int
}
