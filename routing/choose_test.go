package routing

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestChooseThenChat: Choose decides without calling a model, and Chat
// given that Choice answers with its model (the one the request was
// shaped for), even when the rules would now pick another.
func TestChooseThenChat(t *testing.T) {
	r, p, _, _, _ := newTestRouter(t, func(o *Options) {
		o.Pin = map[string]string{TaskCode: "p/mid"}
		o.Profiles = map[string][]Profile{"p": {{ID: "p:one", Provider: "p", Key: "k1"}}}
	})
	sess := &core.Session{ID: 1, Conversation: core.ConversationKey{Channel: "console", Chat: "local"}}
	c := Call{Purpose: "chat", Session: sess, Req: userMsg("hello there")}
	ch, err := r.Choose(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Model.Ref != "p/cheap" || ch.Model.ContextWindow != 8000 || ch.TaskType != TaskChat || ch.Reason == "" {
		t.Fatalf("choice = %+v", ch)
	}
	if n := len(p.Calls()); n != 0 {
		t.Fatalf("Choose called a model %d times", n)
	}
	// The messages changed after the choice (trimmed, compacted): the
	// routed call keeps the choice instead of classifying them again.
	c.Choice = ch
	c.Req = userMsg("refactor this golang function")
	res, err := r.Chat(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "p/cheap" || res.TaskType != TaskChat || res.Reason != ch.Reason || res.Profile != "p:one" {
		t.Fatalf("result = model %s task %s reason %q profile %q; want the choice's", res.Model, res.TaskType, res.Reason, res.Profile)
	}
	// Without a choice the same request is decided afresh (the code pin).
	c.Choice = nil
	if res, _ = r.Chat(context.Background(), c); res.Model != "p/mid" {
		t.Fatalf("undecided call went to %s", res.Model)
	}
	// A choice that cannot be made is an error with the task type.
	c.Model = "nope"
	if ch, err = r.Choose(context.Background(), c); core.ErrorKind(err) != core.KindInvalid || ch.TaskType != TaskCode {
		t.Fatalf("unknown model: %+v, %v", ch, err)
	}
}
