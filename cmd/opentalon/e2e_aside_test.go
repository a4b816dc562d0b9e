package main

import (
	"context"
	"fmt"
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
	waitQueued(t, h, 1)
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

// TestE2EModelPinnedWhileAMessageWaitsAnswersItAtOnce: a message waits
// for a provider that asked for a minute; the user pins another model
// with /model, answered at once, and the waiting message is tried again
// at once, answered by the pinned model (without the wake it waited for
// the next check, 15 s).
func TestE2EModelPinnedWhileAMessageWaitsAnswersItAtOnce(t *testing.T) {
	t.Parallel()
	limited := providertest.NewOpenAI(t)
	limited.SetReply(func(providertest.Received) providertest.Script {
		return providertest.Script{Status: 429, Header: map[string]string{"Retry-After": "60"}}
	})
	steady := providertest.NewOpenAI(t)
	steady.SetReply(modelReply)
	y := fmt.Sprintf(`state:
  data_dir: %q
models:
  providers:
    one: { api: openai-completions, base_url: %q, api_key: k1 }
    two: { api: openai-completions, base_url: %q, api_key: k2 }
  catalog:
    one/fast: { alias: fast, weight: 90 }
    two/steady: { alias: steady, weight: 10 }
routing: { primary: one/fast }
server:
  listen: ""
`, t.TempDir(), limited.BaseURL(), steady.BaseURL())
	h := startApp(t, parseConfig(t, y))
	h.send("hi")
	if got := h.next(); !strings.HasPrefix(got, "⏳ Your answer is delayed") {
		t.Fatalf("console line = %q; want the delay notice", got)
	}
	waitQueued(t, h, 1)
	h.send("/model steady")
	if got := h.nextWithin(8 * time.Second); !strings.Contains(got, "two/steady") {
		t.Fatalf("/model steady answered %q; want the pin", got)
	}
	if got := h.nextWithin(8 * time.Second); got != "answer from steady" {
		t.Fatalf("console line = %q; want the waiting message answered by the pinned model at once", got)
	}
}

// waitQueued waits until queue item id waits for a later time (the
// delay notice goes out before the wait is written).
func waitQueued(t *testing.T, h *harness, id int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		it, st, err := h.app.db.QueueItem(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st == core.StatusQueued && it.NotBefore.After(time.Now()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue item %d is %s; want it waiting", id, st)
		}
	}
}
