package main

// GET /metrics after real traffic through the fake Telegram, parsed with
// the Prometheus text parser.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// scrape fetches and parses /metrics.
func scrape(t *testing.T, addr string, header map[string]string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics = %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample finds the sample of family name whose labels include want;
// ok=false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f, ok := fams[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value is a counter's or gauge's value (-1 when absent).
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m, ok := sample(fams, name, labels)
	switch {
	case !ok:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func histCount(fams map[string]*dto.MetricFamily, stage string) uint64 {
	m, ok := sample(fams, "opentalon_stage_duration_seconds", map[string]string{"stage": stage})
	if !ok {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// failingPostHook fails the post-hooks of a message that says "break the
// hook", like a Lua post-hook raising an error.
type failingPostHook struct{}

func (failingPostHook) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	return core.PreResult{Text: in.Text}, nil
}

func (failingPostHook) Post(_ context.Context, in core.HookInput, answer string) (string, error) {
	if strings.Contains(in.Text, "break the hook") {
		return "", errors.New("hook.lua:3: attempt to index a nil value")
	}
	return answer, nil
}

func TestE2EMetricsAfterTelegramTraffic(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	bot := telegramtest.New(t, tgToken)
	cfg := loadConfigFile(t, writeConfig(t, telegramConfig(t.TempDir(), llm.BaseURL(), bot.URL)))
	cfg.Queue.MaxAttempts = 1 // a failed call is given up at once, not retried after 2 s
	h := startAppWith(t, cfg, AppOptions{Hooks: failingPostHook{}})
	addr := waitAddr(t, h.app)

	const userID, chatID, groupID = 424242, 424242, -100987654
	alice, bob := telegramtest.User(userID, "alice"), telegramtest.User(515151, "bob")
	for i := range 3 {
		bot.AddUpdate(bot.Private(alice, fmt.Sprintf("question %d", i)))
	}
	bot.AddUpdate(bot.Group(groupID, bob, "@"+bot.Bot.Username+" group question", 0))
	sent := bot.WaitSent(t, 4, 20*time.Second)

	// A 👍 on an answer is learned (the ledger and affinity have rows).
	bot.AddUpdate(telegramtest.Reaction(chatID, models.ChatTypePrivate, sent[0].MessageID, alice, nil, []string{"👍"}))
	// One passing LLM failure (the request waits in the queue and is
	// answered on its next try) and one failing post-hook.
	llm.Enqueue(providertest.Script{Status: 503, Body: `{"error":{"message":"overloaded"}}`})
	bot.AddUpdate(bot.Private(alice, "this one fails"))
	bot.AddUpdate(bot.Private(alice, "break the hook"))
	bot.WaitSent(t, 6, 20*time.Second)

	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams = scrape(t, addr, nil)
		done := value(fams, "opentalon_requests_total", map[string]string{"kind": "reaction", "outcome": "answered"}) == 1 &&
			value(fams, "opentalon_requests_total", map[string]string{"kind": "message", "outcome": "failed"}) == 1 &&
			value(fams, "opentalon_messages_answered_total", map[string]string{"channel": "telegram"}) == 5
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tg := map[string]string{"channel": "telegram"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"opentalon_messages_accepted_total", tg, 6},
		{"opentalon_messages_answered_total", tg, 5},
		{"opentalon_requests_total", map[string]string{"channel": "telegram", "kind": "message", "outcome": "failed"}, 1},
		{"opentalon_requests_total", map[string]string{"channel": "telegram", "kind": "message", "outcome": "waiting"}, 1},
		{"opentalon_llm_calls_total", map[string]string{"model": "fake/small", "provider": "fake", "outcome": "ok"}, 6},
		{"opentalon_llm_calls_total", map[string]string{"model": "fake/small", "provider": "fake", "outcome": "unavailable"}, 1},
		{"opentalon_hook_failures_total", map[string]string{"stage": "post_hooks"}, 1},
		{"opentalon_llm_ledger_calls_total", map[string]string{"model": "fake/small"}, 6},
		{"opentalon_queue_depth", map[string]string{"status": "queued"}, 0},
		{"opentalon_queue_oldest_age_seconds", nil, 0},
		{"opentalon_channel_up", tg, 1},
		{"opentalon_auth_profile_cooling", map[string]string{"provider": "fake", "profile": "fake:default"}, 0},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if v := value(fams, "opentalon_llm_tokens_total", map[string]string{"model": "fake/small", "direction": "input"}); v <= 0 {
		t.Errorf("input tokens = %v; want the ledger's tokens", v)
	}
	if v := value(fams, "opentalon_channel_last_event_age_seconds", tg); v < 0 || v > 60 {
		t.Errorf("seconds since telegram's last event = %v", v)
	}
	// The queue stage counts the reaction too.
	for stage, want := range map[string]uint64{"queue": 7, "agent": 7, "llm": 7, "pre_hooks": 7, "post_hooks": 6, "delivery": 5} {
		if got := histCount(fams, stage); got != want {
			t.Errorf("stage %s observed %d times, want %d", stage, got, want)
		}
	}

	// Counters only move forward: one more message moves them by one.
	bot.AddUpdate(bot.Private(alice, "one more"))
	bot.WaitSent(t, 7, 20*time.Second)
	deadline = time.Now().Add(20 * time.Second)
	var again map[string]*dto.MetricFamily
	for {
		again = scrape(t, addr, nil)
		if value(again, "opentalon_messages_answered_total", tg) == 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := value(again, "opentalon_messages_answered_total", tg); got != 6 {
		t.Errorf("answered after one more message = %v, want 6", got)
	}
	if got := value(again, "opentalon_llm_ledger_calls_total", map[string]string{"model": "fake/small"}); got != 7 {
		t.Errorf("ledger calls after one more message = %v, want 7", got)
	}

	// No label carries a chat or user id.
	for name, f := range again {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, id := range []string{"424242", "987654", "515151"} {
					if strings.Contains(l.GetValue(), id) {
						t.Errorf("%s has label %s=%q, which carries a chat or user id", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}

// The console, which has no platform health, still reports when it last
// read a line: /metrics has its age, as the status page has it.
func TestE2EMetricsConsoleLastEvent(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	cfg := strings.Replace(testConfig(t.TempDir(), llm.BaseURL(), ""), `listen: ""`, `listen: "127.0.0.1:0"`, 1)
	h := startApp(t, loadConfigFile(t, writeConfig(t, cfg)))
	addr := waitAddr(t, h.app)
	console := map[string]string{"channel": "console"}
	if _, ok := sample(scrape(t, addr, nil), "opentalon_channel_last_event_age_seconds", console); ok {
		t.Fatal("the console has a last event before it read a line")
	}
	h.send("hello")
	h.expect("echo: hello")
	if v, ok := sample(scrape(t, addr, nil), "opentalon_channel_last_event_age_seconds", console); !ok || v.GetGauge().GetValue() < 0 || v.GetGauge().GetValue() > 60 {
		t.Fatalf("console's last event age = %v (present %v); want the seconds since it read the line", v.GetGauge().GetValue(), ok)
	}
}
