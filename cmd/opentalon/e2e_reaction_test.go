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
	t.Parallel()
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

// tagPost is a post-hook that tags every answer.
type tagPost struct{}

func (tagPost) Pre(_ context.Context, in core.HookInput) (core.PreResult, error) {
	return core.PreResult{Text: in.Text}, nil
}
func (tagPost) Post(_ context.Context, _ core.HookInput, answer string) (string, error) {
	return answer + " #tagged", nil
}

// TestE2EEveryAnswerPassesThePostHook: the first answer, a /retry, a "no,
// try again" escalation and a 👎 re-answer all reach the user through the
// post-hooks.
func TestE2EEveryAnswerPassesThePostHook(t *testing.T) {
	t.Parallel()
	llm := providertest.NewOpenAI(t)
	llm.SetReply(modelReply)
	// Learning off: every new question goes to the highest weight.
	cfg := loadConfigFile(t, writeConfig(t, twoModelConfig(t.TempDir(), llm.BaseURL(), "routing:\n  escalate_on_reaction: true\n  affinity: { enabled: false }\n")))
	h := startAppWith(t, cfg, AppOptions{Hooks: tagPost{}})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "console", Chat: "local"}
	steps := []struct{ send, want string }{
		{"what is a monad?", "answer from small #tagged"},
		{"/retry", "answer from big #tagged"},
		{"what is a functor?", "answer from small #tagged"},
		{"no, try again", "answer from big #tagged"},
		{"what is an arrow?", "answer from small #tagged"},
	}
	for _, s := range steps {
		h.send(s.send)
		if got := h.readUntil("answer from"); !strings.HasSuffix(got, s.want) {
			t.Fatalf("%q answered %q; want it to end with %q", s.send, got, s.want)
		}
	}
	sess, err := h.app.db.ActiveSession(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	var last *core.Reply
	deadline := time.Now().Add(10 * time.Second)
	for last == nil || last.Sent[0] == "" {
		if last, err = h.app.db.LastReply(ctx, sess.ID); err != nil || time.Now().After(deadline) {
			t.Fatalf("delivery of the last reply never recorded: %+v (%v)", last, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.app.gateway.React(ctx, core.Reaction{Conversation: conv, EventID: "r1", MessageID: last.Sent[0], UserID: "local", Emoji: "👎", Added: true, Polarity: core.Negative}); err != nil {
		t.Fatal(err)
	}
	if got := h.readUntil("answer from"); !strings.HasSuffix(got, "answer from big #tagged") || !strings.Contains(got, "Answered again by fake/big") {
		t.Fatalf("the 👎 re-answer = %q; want it re-answered by fake/big and tagged", got)
	}
}
