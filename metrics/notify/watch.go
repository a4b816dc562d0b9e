package notify

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// ChannelStatus is a channel's liveness as the Monitor reads it.
type ChannelStatus struct {
	Name string
	Up   bool
	// Err says why it is down.
	Err string
}

// Monitor emits EventChannelDown once per outage for a channel down for
// longer than DownAfter.
type Monitor struct {
	// Statuses reads every channel's liveness.
	Statuses func() []ChannelStatus
	// DownAfter is how long a channel may be down before it is reported
	// (default 1 minute); Every how often the statuses are read
	// (default the smaller of 5s and DownAfter/4).
	DownAfter time.Duration
	Every     time.Duration
	Events    core.OpsEvents
	Now       func() time.Time

	since map[string]time.Time
	told  map[string]bool
}

// Run watches until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	if m.DownAfter <= 0 {
		m.DownAfter = time.Minute
	}
	if m.Every <= 0 {
		m.Every = min(5*time.Second, max(m.DownAfter/4, 10*time.Millisecond))
	}
	if m.Now == nil {
		m.Now = time.Now
	}
	m.since, m.told = map[string]time.Time{}, map[string]bool{}
	t := time.NewTicker(m.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.check()
		}
	}
}

func (m *Monitor) check() {
	now := m.Now()
	for _, st := range m.Statuses() {
		if st.Up {
			delete(m.since, st.Name)
			delete(m.told, st.Name)
			continue
		}
		start, ok := m.since[st.Name]
		if !ok {
			m.since[st.Name] = now
			continue
		}
		if down := now.Sub(start); down >= m.DownAfter && !m.told[st.Name] {
			m.told[st.Name] = true
			m.Events.Emit(core.OpsEvent{Kind: core.EventChannelDown, Subject: st.Name, At: now,
				Message: fmt.Sprintf("channel %s has been down for %s: %s", st.Name, down.Round(time.Second), st.Err),
				Details: map[string]string{"channel": st.Name, "down_since": start.UTC().Format(time.RFC3339)}})
		}
	}
}

// PluginWatch turns the plugin manager's lifecycle events into
// EventPluginRestartLoop: a plugin stopped Threshold times within Window
// (default 3 in 10 minutes), or given up.
type PluginWatch struct {
	Events    core.OpsEvents
	Threshold int
	Window    time.Duration
	Now       func() time.Time

	mu    sync.Mutex
	stops map[string][]time.Time
}

// OnEvent takes the manager's events ("registered", "deregistered",
// "gave_up") for plugin.
func (w *PluginWatch) OnEvent(plugin, event string) {
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	threshold, window := w.Threshold, w.Window
	if threshold <= 0 {
		threshold = 3
	}
	if window <= 0 {
		window = 10 * time.Minute
	}
	switch event {
	case "gave_up":
		w.Events.Emit(core.OpsEvent{Kind: core.EventPluginRestartLoop, Subject: plugin, At: now,
			Message: fmt.Sprintf("plugin %s stopped and will not be restarted (plugins.tools.max_restarts); see the log for its output", plugin)})
	case "deregistered":
		w.mu.Lock()
		if w.stops == nil {
			w.stops = map[string][]time.Time{}
		}
		recent := w.stops[plugin][:0]
		for _, t := range w.stops[plugin] {
			if now.Sub(t) < window {
				recent = append(recent, t)
			}
		}
		recent = append(recent, now)
		w.stops[plugin] = recent
		n := len(recent)
		w.mu.Unlock()
		if n >= threshold {
			w.Events.Emit(core.OpsEvent{Kind: core.EventPluginRestartLoop, Subject: plugin, At: now,
				Message: fmt.Sprintf("plugin %s stopped %d times within %s: it is in a restart loop", plugin, n, window)})
		}
	}
}
