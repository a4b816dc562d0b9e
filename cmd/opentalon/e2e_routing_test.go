package main

// The /model family and /retry through the whole App on the console
// (issue 4), with the default routing config (affinity on).

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// readUntil reads console lines until one contains marker and returns
// them joined.
func (h *harness) readUntil(marker string) string {
	h.t.Helper()
	var got []string
	for {
		l := h.next()
		got = append(got, l)
		if strings.Contains(l, marker) {
			return strings.Join(got, "\n")
		}
	}
}

func TestE2EModelCommandsThroughApp(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	h := startApp(t, loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), ""))))

	h.send("hello there")
	h.expect("answer from small") // highest weight answers first
	// /retry re-answers with the next model by weight.
	before := llm.Count()
	h.send("/retry")
	got := h.readUntil("answer from big")
	if !strings.Contains(got, "fake/big") || !strings.Contains(got, "fake/small") {
		t.Fatalf("/retry = %q; want the answer by fake/big saying fake/small was rejected", got)
	}
	if llm.Count() != before+1 {
		t.Fatalf("/retry made %d LLM calls; want 1", llm.Count()-before)
	}
	if r, _ := llm.Last(); r.Model != "big" || r.LastUser() != "hello there" {
		t.Fatalf("/retry asked model %q %q; want big with the previous question", r.Model, r.LastUser())
	}

	// /status shows the conversation's tokens and cost (catalog prices).
	h.send("/status")
	status := h.readUntil("Tokens:")
	if !regexp.MustCompile(`Tokens: [1-9]\d* in, [1-9]\d* out \(\$0\.\d*[1-9]\d*\)`).MatchString(status) {
		t.Fatalf("/status = %q; want this conversation's tokens and cost", status)
	}
	drain(h)

	h.send("/models")
	models := h.readUntil("fake/big")
	for _, want := range []string{"fake/small (small)", "weight 80", "fake/big (big)", "weight 20"} {
		if !strings.Contains(models, want) {
			t.Fatalf("/models = %q; want %q", models, want)
		}
	}
	drain(h)

	// /model <alias> pins: the next answer comes from that model.
	h.send("/model big")
	if got := h.readUntil("fake/big"); !strings.Contains(got, "Pinned fake/big") {
		t.Fatalf("/model big = %q", got)
	}
	drain(h)
	h.send("what is the weather like?")
	h.expect("answer from big")
	if r, _ := llm.Last(); r.Model != "big" {
		t.Fatalf("pinned request went to model %q; want big", r.Model)
	}
	h.send("/model")
	if got := h.readUntil("Model:"); !strings.Contains(got, "Model: fake/big (pinned") {
		t.Fatalf("/model = %q; want the pin and its reason", got)
	}
	drain(h)
	h.send("/model nonsense")
	if got := h.readUntil("nonsense"); !strings.Contains(got, `Unknown model "nonsense"`) {
		t.Fatalf("/model nonsense = %q", got)
	}
	drain(h)

	// /retry recorded a regenerate signal against the rejected reply.
	ctx := context.Background()
	sess, err := h.app.db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "local"})
	if err != nil {
		t.Fatal(err)
	}
	aff, err := h.app.db.Affinities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	neg := 0
	for _, a := range aff {
		if a.Model == "fake/small" {
			neg += a.Negatives
		}
	}
	if neg < 1 || sess.ModelPin != "fake/big" {
		t.Fatalf("affinity %+v, pin %q; want a negative for fake/small and the pin on fake/big", aff, sess.ModelPin)
	}
	// /model auto unpins.
	h.send("/model auto")
	h.readUntil("Unpinned")
	if sess, err := h.app.db.ActiveSession(ctx, core.ConversationKey{Channel: "console", Chat: "local"}); err != nil || sess.ModelPin != "" {
		t.Fatalf("after /model auto the pin is %q (%v); want none", sess.ModelPin, err)
	}
	drain(h)
	// /model explains the learned choice: acceptance and price, the
	// evidence, the runner-up, settled or exploring.
	h.send("/model")
	got = h.readUntil("Learned choice")
	if !regexp.MustCompile(`Learned choice for chat: fake/(small|big), \d+% accepted over [\d.]+ decayed signals at \$[\d.]+ per M tokens \(utility [\d.-]+\); (settled|exploring)\.`).MatchString(got) {
		t.Fatalf("/model = %q; want the explanation of the learned choice", got)
	}
	if next := h.readUntil("Next:"); !strings.Contains(next, "fake/") {
		t.Fatalf("/model = %q; want the runner-up", next)
	}
}

// drain discards console lines that arrive within a short quiet period
// (the tail of a multi-line command answer). It waits for silence, not for
// a result, so it never decides a test's outcome.
func drain(h *harness) {
	for {
		select {
		case <-h.lines:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// The console takes channels.<x>.model and channels.<x>.models as every
// channel does (issue 4): the channel's model, and a chat's over it.
func TestE2EConsoleChannelModels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, block, want string }{
		{"model", "channels:\n  console: { model: big }\n", "answer from big"},
		{"models of its chat", "channels:\n  console: { model: small, models: { local: big } }\n", "answer from big"},
		{"models of another chat", "channels:\n  console: { models: { elsewhere: big } }\n", "answer from small"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			llm := providertest.NewOpenAI(t)
			llm.SetReply(modelReply)
			h := startApp(t, loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), tc.block))))
			h.send("who answers?")
			h.expect(tc.want)
		})
	}
}
