package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 5 * time.Second

// The help of the series read from state rather than counted.
const (
	helpQueueDepth = "Queue rows waiting (queued) or being answered (running)."
	helpQueueAge   = "Age of the oldest queued item (0 when none)."
	helpTokens     = "Tokens of successful LLM calls from the usage ledger, by model and direction (input, output)."
	helpCost       = "Cost of successful LLM calls from the usage ledger, by model."
	helpLedger     = "Successful LLM calls in the usage ledger, by model."
	helpCooling    = "1 while an auth profile is cooling down after failures."
	helpCooldown   = "Seconds until an auth profile may be used again (0 when it is not cooling)."
	helpChannelUp  = "1 while a channel runs and its platform connection works."
	helpLastEvent  = "Seconds since the platform last delivered an event to the channel (absent before the first)."
	helpChRestarts = "Restarts of a channel whose Run failed."
	helpPluginUp   = "1 while a tool plugin is registered."
)

// ledgerSums sums the usage ledger up to row lastID, by model.
type ledgerSums struct {
	mu     sync.Mutex
	ledger map[string]core.UsageTotal
	lastID int64
}

// collectDatabase adds what is read from the database: the queue, the
// ledger and the cooldowns. The error joins those of the sources that
// failed; their series are left out.
func (m *Metrics) collectDatabase(ctx context.Context, s *scrape) error {
	o := m.o
	if o.Exports != nil && !o.Exports() {
		return nil // another replica exports what the database holds
	}
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	now := o.Now()
	var errs []error
	if o.Queue != nil {
		if counts, err := o.Queue.QueueCounts(ctx); err == nil {
			s.gauge("opentalon_queue_depth", helpQueueDepth, float64(counts[core.StatusQueued]), "status", core.StatusQueued)
			s.gauge("opentalon_queue_depth", helpQueueDepth, float64(counts[core.StatusRunning]), "status", core.StatusRunning)
		} else {
			errs = append(errs, fmt.Errorf("opentalon_queue_depth: %w", err))
		}
		if oldest, err := o.Queue.OldestQueued(ctx); err == nil {
			age := 0.0
			if !oldest.IsZero() {
				age = max(now.Sub(oldest).Seconds(), 0)
			}
			s.gauge("opentalon_queue_oldest_age_seconds", helpQueueAge, age)
		} else {
			errs = append(errs, fmt.Errorf("opentalon_queue_oldest_age_seconds: %w", err))
		}
	}
	if o.Ledger != nil {
		if err := m.readLedger(ctx); err != nil {
			errs = append(errs, fmt.Errorf("opentalon_llm_tokens_total: %w", err))
		}
		l := &m.ledger
		l.mu.Lock()
		for model, t := range l.ledger {
			s.counter("opentalon_llm_tokens_total", helpTokens, float64(t.InputTokens), "model", model, "direction", "input")
			s.counter("opentalon_llm_tokens_total", helpTokens, float64(t.OutputTokens), "model", model, "direction", "output")
			s.counter("opentalon_llm_cost_usd_total", helpCost, t.CostUSD, "model", model)
			s.counter("opentalon_llm_ledger_calls_total", helpLedger, float64(t.Calls), "model", model)
		}
		l.mu.Unlock()
	}
	if o.Profiles != nil {
		for _, p := range o.Profiles() {
			left := 0.0
			if p.CooldownUntil.After(now) {
				left = p.CooldownUntil.Sub(now).Seconds()
			}
			cooling := 0.0
			if left > 0 {
				cooling = 1
			}
			s.gauge("opentalon_auth_profile_cooling", helpCooling, cooling, "provider", p.Provider, "profile", p.ID)
			s.gauge("opentalon_auth_profile_cooldown_seconds", helpCooldown, left, "provider", p.Provider, "profile", p.ID)
		}
	}
	return errors.Join(errs...)
}

// collectProcessState adds the channels' and plugins' state.
func (m *Metrics) collectProcessState(s *scrape) {
	o := m.o
	now := o.Now()
	if o.Channels != nil {
		for _, c := range o.Channels() {
			up := 0.0
			if c.Up {
				up = 1
			}
			s.gauge("opentalon_channel_up", helpChannelUp, up, "channel", c.Name)
			s.counter("opentalon_channel_restarts_total", helpChRestarts, float64(c.Restarts), "channel", c.Name)
			if !c.LastEvent.IsZero() {
				s.gauge("opentalon_channel_last_event_age_seconds", helpLastEvent, max(now.Sub(c.LastEvent).Seconds(), 0), "channel", c.Name)
			}
		}
	}
	for name, p := range m.PluginHealth() {
		up := 0.0
		if p.Up {
			up = 1
		}
		s.gauge("opentalon_plugin_up", helpPluginUp, up, "plugin", name)
	}
}

// readLedger adds the ledger rows written since the last scrape.
func (m *Metrics) readLedger(ctx context.Context) error {
	s := &m.ledger
	s.mu.Lock()
	after := s.lastID
	s.mu.Unlock()
	rows, last, err := m.o.Ledger.UsageByModelAfter(ctx, after)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastID != after {
		return nil // a concurrent scrape added them
	}
	if s.ledger == nil {
		s.ledger = map[string]core.UsageTotal{}
	}
	for _, r := range rows {
		t := s.ledger[r.Key]
		t.Key = r.Key
		t.Calls += r.Calls
		t.InputTokens += r.InputTokens
		t.OutputTokens += r.OutputTokens
		t.CostUSD += r.CostUSD
		s.ledger[r.Key] = t
	}
	s.lastID = last
	return nil
}
