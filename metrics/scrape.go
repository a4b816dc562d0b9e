package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opentalon/opentalon/core"
)

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 5 * time.Second

var (
	descQueueDepth = prometheus.NewDesc("opentalon_queue_depth", "Queue rows waiting (queued) or being answered (running).", []string{"status"}, nil)
	descQueueAge   = prometheus.NewDesc("opentalon_queue_oldest_age_seconds", "Age of the oldest queued item (0 when none).", nil, nil)
	descTokens     = prometheus.NewDesc("opentalon_llm_tokens_total", "Tokens of successful LLM calls from the usage ledger, by model and direction (input, output).", []string{"model", "direction"}, nil)
	descCost       = prometheus.NewDesc("opentalon_llm_cost_usd_total", "Cost of successful LLM calls from the usage ledger, by model.", []string{"model"}, nil)
	descLedger     = prometheus.NewDesc("opentalon_llm_ledger_calls_total", "Successful LLM calls in the usage ledger, by model.", []string{"model"}, nil)
	descCooling    = prometheus.NewDesc("opentalon_auth_profile_cooling", "1 while an auth profile is cooling down after failures.", []string{"provider", "profile"}, nil)
	descCooldown   = prometheus.NewDesc("opentalon_auth_profile_cooldown_seconds", "Seconds until an auth profile may be used again (0 when it is not cooling).", []string{"provider", "profile"}, nil)
	descChannelUp  = prometheus.NewDesc("opentalon_channel_up", "1 while a channel runs and its platform connection works.", []string{"channel"}, nil)
	descLastEvent  = prometheus.NewDesc("opentalon_channel_last_event_age_seconds", "Seconds since the platform last delivered an event to the channel (absent before the first).", []string{"channel"}, nil)
	descChRestarts = prometheus.NewDesc("opentalon_channel_restarts_total", "Restarts of a channel whose Run failed.", []string{"channel"}, nil)
	descPluginUp   = prometheus.NewDesc("opentalon_plugin_up", "1 while a tool plugin is registered.", []string{"plugin"}, nil)
)

// scraped collects, when scraped, what is read from state rather than
// counted: from the database the queue, the ledger and cooldowns; from
// the process channels and plugins. One collector per part.
type scraped struct {
	m    *Metrics
	part int

	mu sync.Mutex
	// ledger sums the usage ledger up to row lastID, by model.
	ledger map[string]core.UsageTotal
	lastID int64
}

// The parts of scraped.
const (
	fromDatabase = iota
	fromProcess
)

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	descs := []*prometheus.Desc{descChannelUp, descLastEvent, descChRestarts, descPluginUp}
	if s.part == fromDatabase {
		descs = []*prometheus.Desc{descQueueDepth, descQueueAge, descTokens, descCost, descLedger, descCooling, descCooldown}
	}
	for _, d := range descs {
		ch <- d
	}
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	o := s.m.o
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := o.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if s.part == fromProcess {
		s.collectProcess(gauge, counter, now)
		return
	}
	if o.Exports != nil && !o.Exports() {
		return // another replica exports what the database holds
	}
	if o.Queue != nil {
		if counts, err := o.Queue.QueueCounts(ctx); err == nil {
			gauge(descQueueDepth, float64(counts[core.StatusQueued]), core.StatusQueued)
			gauge(descQueueDepth, float64(counts[core.StatusRunning]), core.StatusRunning)
		} else {
			ch <- prometheus.NewInvalidMetric(descQueueDepth, err)
		}
		if oldest, err := o.Queue.OldestQueued(ctx); err == nil {
			age := 0.0
			if !oldest.IsZero() {
				age = max(now.Sub(oldest).Seconds(), 0)
			}
			gauge(descQueueAge, age)
		} else {
			ch <- prometheus.NewInvalidMetric(descQueueAge, err)
		}
	}
	if o.Ledger != nil {
		if err := s.readLedger(ctx); err != nil {
			ch <- prometheus.NewInvalidMetric(descTokens, err)
		}
		s.mu.Lock()
		for model, t := range s.ledger {
			counter(descTokens, float64(t.InputTokens), model, "input")
			counter(descTokens, float64(t.OutputTokens), model, "output")
			counter(descCost, t.CostUSD, model)
			counter(descLedger, float64(t.Calls), model)
		}
		s.mu.Unlock()
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
			gauge(descCooling, cooling, p.Provider, p.ID)
			gauge(descCooldown, left, p.Provider, p.ID)
		}
	}
}

// collectProcess collects the channels' and plugins' state.
func (s *scraped) collectProcess(gauge, counter func(*prometheus.Desc, float64, ...string), now time.Time) {
	o := s.m.o
	if o.Channels != nil {
		for _, c := range o.Channels() {
			up := 0.0
			if c.Up {
				up = 1
			}
			gauge(descChannelUp, up, c.Name)
			counter(descChRestarts, float64(c.Restarts), c.Name)
			if !c.LastEvent.IsZero() {
				gauge(descLastEvent, max(now.Sub(c.LastEvent).Seconds(), 0), c.Name)
			}
		}
	}
	for name, p := range s.m.PluginHealth() {
		up := 0.0
		if p.Up {
			up = 1
		}
		gauge(descPluginUp, up, name)
	}
}

// readLedger adds the ledger rows written since the last scrape.
func (s *scraped) readLedger(ctx context.Context) error {
	s.mu.Lock()
	after := s.lastID
	s.mu.Unlock()
	rows, last, err := s.m.o.Ledger.UsageByModelAfter(ctx, after)
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
