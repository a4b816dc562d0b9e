package routing

import (
	"context"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

func newTestRouter(t *testing.T, mod func(*Options)) (*Router, *fakeProvider, *fakeProvider, *MemStore, *fakeClock) {
	t.Helper()
	p, q := &fakeProvider{id: "p"}, &fakeProvider{id: "q"}
	st, clk := NewMemStore(), newClock()
	o := Options{
		Providers: map[string]provider.Provider{"p": p, "q": q},
		Catalog:   testCatalog(),
		Store:     st, Now: clk.Now, Seed: 1,
	}
	if mod != nil {
		mod(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, p, q, st, clk
}

func TestChatMinimal(t *testing.T) {
	r, p, _, st, _ := newTestRouter(t, nil)
	sess := &core.Session{ID: 7, Conversation: core.ConversationKey{Channel: "console", Chat: "local"}}
	res, err := r.Chat(context.Background(), Call{Purpose: "chat", Session: sess, UserID: "u1", Req: userMsg("hello there")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "p/cheap" || res.Text != "ok from cheap" || res.TaskType != TaskChat {
		t.Fatalf("got %+v (%s)", res, res.Text)
	}
	if len(p.Calls()) != 1 {
		t.Fatalf("calls = %v", p.Calls())
	}
	u := st.Usage()
	if len(u) != 1 || u[0].SessionID != 7 || u[0].Conversation != "console:local" || u[0].Model != "p/cheap" || u[0].UserID != "u1" {
		t.Fatalf("usage = %+v", u)
	}
	want := (1000*0.25 + 500*1.25) / 1e6
	if u[0].CostUSD != want || res.Usage.CostUSD != want {
		t.Fatalf("cost = %v / %v, want %v", u[0].CostUSD, res.Usage.CostUSD, want)
	}
}
