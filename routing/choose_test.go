package routing

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
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

func TestCheapestModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		cat  []Model
		want string
	}{
		{"lowest blended price", []Model{{Ref: "p/a", Weight: 90, CostIn: 3, CostOut: 15}, {Ref: "p/b", Weight: 10, CostIn: 0.1, CostOut: 0.4}, {Ref: "p/c", Weight: 50, CostIn: 1, CostOut: 2}}, "p/b"},
		{"weight 0 only when named", []Model{{Ref: "p/a", Weight: 90, CostIn: 3, CostOut: 15}, {Ref: "p/free", Weight: 0}}, "p/a"},
		{"every model weight 0", []Model{{Ref: "p/a", CostIn: 3, CostOut: 15}, {Ref: "p/b", CostIn: 1, CostOut: 1}}, "p/b"},
		{"a tie keeps the higher weight", []Model{{Ref: "p/a", Weight: 20, CostIn: 1, CostOut: 1}, {Ref: "p/b", Weight: 80, CostIn: 1, CostOut: 1}}, "p/b"},
	} {
		r, err := New(Options{Providers: map[string]provider.Provider{"p": &fakeProvider{id: "p"}}, Catalog: tc.cat, Store: NewMemStore()})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.CheapestModel(); got != tc.want {
			t.Errorf("%s: CheapestModel() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
