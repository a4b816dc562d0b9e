package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider/providertest"
)

// TestE2EThumbsDownEscalates: with routing.escalate_on_reaction on, a 👎 on
// the latest answer has the next model by weight answer the question again.
func TestE2EThumbsDownEscalates(t *testing.T) {
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	h := startApp(t, loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), "routing:\n  escalate_on_reaction: true\n"))))
	h.send("what is a monad?")
	h.expect("answer from small")

	ctx := context.Background()
	conv := core.ConversationKey{Channel: "console", Chat: "local"}
	sess, err := h.app.db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	// The console prints a part just before its delivery is recorded:
	// wait for the record.
	var last *core.Reply
	deadline := time.Now().Add(10 * time.Second)
	for {
		last, err = h.app.db.LastReply(ctx, sess.ID)
		if err == nil && last != nil && last.Sent[0] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery of the last reply never recorded: %+v (%v)", last, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := llm.Count()
	if err := h.app.gateway.React(ctx, core.Reaction{Conversation: conv, EventID: "r1", MessageID: last.Sent[0], UserID: "local", Emoji: "👎", Added: true, Polarity: core.Negative}); err != nil {
		t.Fatal(err)
	}
	got := h.readUntil("answer from big")
	if !strings.Contains(got, "Answered again by fake/big") {
		t.Fatalf("after 👎: %q; want the question re-answered by fake/big", got)
	}
	if r, _ := llm.Last(); llm.Count() != before+1 || r.LastUser() != "what is a monad?" {
		t.Fatalf("escalation asked %q in %d calls; want the previous question once", r.LastUser(), llm.Count()-before)
	}
	// A 👍 is learned from but answers nothing.
	if err := h.app.gateway.React(ctx, core.Reaction{Conversation: conv, EventID: "r2", MessageID: last.Sent[0], UserID: "local", Emoji: "👍", Added: true, Polarity: core.Positive}); err != nil {
		t.Fatal(err)
	}
	h.send("/status")
	if l := h.next(); !strings.HasPrefix(l, "Model:") {
		t.Fatalf("after 👍 the next line is %q; a positive reaction must not produce a reply", l)
	}
}
