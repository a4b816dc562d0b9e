package metrics

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// HealthWindow is how far back Health looks (the status page and /models
// say "in the last 15 minutes").
const HealthWindow = 15 * time.Minute

// maxHealthEvents bounds the outcomes Health keeps per model.
const maxHealthEvents = 200

// Health keeps the outcomes of the recent LLM calls of each model: how
// many calls in the last HealthWindow, how many failed and of which kind,
// and when the last failure came. Unlike the credentials' cooldowns it
// sees a provider that fails every call without cooling (a server that
// does not answer). It implements routing.Observer (LLMCall, Failover),
// always on, since the status page and /models read it whether or not
// the metrics are served. Safe for concurrent use.
type Health struct {
	now    func() time.Time
	mu     sync.Mutex
	models map[string]*modelOutcomes
}

type modelOutcomes struct {
	provider string
	events   []outcome // oldest first
}

type outcome struct {
	at   time.Time
	kind string // "ok" or the failure's kind
}

// ModelHealth is one model's recent calls.
type ModelHealth struct {
	Model    string
	Provider string
	Calls    int
	// Failures counts the failed calls by kind ("unavailable",
	// "rate_limited", "auth", ...).
	Failures    map[string]int
	LastFailure time.Time
	LastKind    string
}

// Failed is the number of failed calls.
func (m ModelHealth) Failed() int {
	n := 0
	for _, c := range m.Failures {
		n += c
	}
	return n
}

// State is "ok" (no failure), "failing" (every call failed), "degraded"
// (some did), or "idle" (no call in the window).
func (m ModelHealth) State() string {
	switch f := m.Failed(); {
	case m.Calls == 0:
		return "idle"
	case f == 0:
		return "ok"
	case f == m.Calls:
		return "failing"
	}
	return "degraded"
}

// NewHealth builds an empty Health; now is the clock (default time.Now).
func NewHealth(now func() time.Time) *Health {
	if now == nil {
		now = time.Now
	}
	return &Health{now: now, models: map[string]*modelOutcomes{}}
}

// LLMCall implements routing.Observer: one attempt of a call and its
// outcome.
func (h *Health) LLMCall(model, provider, result string, _ time.Duration) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[model]
	if m == nil {
		m = &modelOutcomes{provider: provider}
		h.models[model] = m
	}
	m.events = append(m.events, outcome{now, result})
	if len(m.events) > maxHealthEvents {
		m.events = slices.Delete(m.events, 0, len(m.events)-maxHealthEvents)
	}
}

// Failover implements routing.Observer; the attempts tell Health enough.
func (h *Health) Failover(string, string) {}

// Models returns each model called in the window, by reference.
func (h *Health) Models() []ModelHealth {
	since := h.now().Add(-HealthWindow)
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ModelHealth
	for _, ref := range slices.Sorted(maps.Keys(h.models)) {
		m := h.models[ref]
		i := sort.Search(len(m.events), func(i int) bool { return !m.events[i].at.Before(since) })
		m.events = m.events[i:]
		if len(m.events) == 0 {
			continue
		}
		mh := ModelHealth{Model: ref, Provider: m.provider, Failures: map[string]int{}}
		for _, e := range m.events {
			mh.Calls++
			if e.kind != "ok" {
				mh.Failures[e.kind]++
				mh.LastFailure, mh.LastKind = e.at, e.kind
			}
		}
		out = append(out, mh)
	}
	return out
}

// Provider sums the recent calls of provider's models.
func (h *Health) Provider(provider string) ModelHealth {
	sum := ModelHealth{Provider: provider, Failures: map[string]int{}}
	for _, m := range h.Models() {
		if m.Provider != provider {
			continue
		}
		sum.Calls += m.Calls
		for k, n := range m.Failures {
			sum.Failures[k] += n
		}
		if m.LastFailure.After(sum.LastFailure) {
			sum.LastFailure, sum.LastKind = m.LastFailure, m.LastKind
		}
	}
	return sum
}
