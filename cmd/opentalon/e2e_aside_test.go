package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2EStatusWhileAMessageWaitsForTheProvider: a message waits for a
// provider that asked for a minute; /status and /model, sent meanwhile,
// are answered at once (the router's commands are aside too), /status
// saying what waits, and neither reaches the LLM.
func TestE2EStatusWhileAMessageWaitsForTheProvider(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(func(r providertest.Received) providertest.Script {
		return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "60"}}
	})
	h := startApp(t, parseConfig(t, testConfig(t.TempDir(), llm.BaseURL(), "")))
	h.send("hi")
	if got := h.next(); !strings.HasPrefix(got, "⏳ Your answer is delayed: the AI provider asked me to slow down.") {
		t.Fatalf("console line = %q; want the delay notice", got)
	}
	// The notice goes out before the wait is written.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		it, st, err := h.app.db.QueueItem(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if st == core.StatusQueued && it.NotBefore.After(time.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message is %s; want it waiting", st)
		}
	}
	calls := llm.Count()
	h.send("/status")
	var status []string
	for {
		l := h.nextWithin(10 * time.Second)
		status = append(status, l)
		if strings.HasPrefix(l, "Waiting:") {
			break
		}
	}
	if !strings.HasPrefix(status[0], "Model: fake/small") || !strings.HasPrefix(status[len(status)-1], "Waiting: 1 earlier message, tried again in about") {
		t.Fatalf("/status answered %q; want the model, and the message waiting", status)
	}
	h.send("/model")
	if got := h.nextWithin(10 * time.Second); !strings.HasPrefix(got, "Model: fake/small") {
		t.Fatalf("/model answered %q; want the model in use", got)
	}
	if n := llm.Count(); n != calls {
		t.Fatalf("the commands reached the LLM: %d calls, want %d", n, calls)
	}
}
