package metrics

import (
	"testing"
	"time"
)

func TestHealthCountsRecentFailuresByKind(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	h := NewHealth(func() time.Time { return now })
	h.LLMCall("p/a", "p", "ok", time.Second)
	h.LLMCall("p/a", "p", "rate_limited", time.Second)
	for range 3 {
		h.LLMCall("q/b", "q", "unavailable", time.Second)
	}
	ms := h.Models()
	if len(ms) != 2 || ms[0].Model != "p/a" || ms[0].State() != "degraded" || ms[0].Failures["rate_limited"] != 1 ||
		ms[1].State() != "failing" || ms[1].Failures["unavailable"] != 3 || ms[1].LastKind != "unavailable" {
		t.Fatalf("models = %+v", ms)
	}
	if p := h.Provider("q"); p.Calls != 3 || p.Failed() != 3 || p.State() != "failing" {
		t.Fatalf("provider q = %+v", p)
	}
	if p := h.Provider("none"); p.State() != "idle" {
		t.Fatalf("a provider without calls = %+v", p)
	}
	// Past the window the calls are forgotten; a success after failures
	// makes the model degraded, not failing.
	now = now.Add(HealthWindow + time.Second)
	h.LLMCall("q/b", "q", "ok", time.Second)
	ms = h.Models()
	if len(ms) != 1 || ms[0].Model != "q/b" || ms[0].State() != "ok" || ms[0].Calls != 1 {
		t.Fatalf("after the window: %+v", ms)
	}
	for range maxHealthEvents + 10 {
		h.LLMCall("q/b", "q", "timeout", time.Second)
	}
	if ms := h.Models(); ms[0].Calls != maxHealthEvents {
		t.Fatalf("kept %d outcomes; want at most %d", ms[0].Calls, maxHealthEvents)
	}
}
