package routing

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

type events struct {
	mu  sync.Mutex
	got []core.OpsEvent
}

func (e *events) Emit(ev core.OpsEvent) { e.mu.Lock(); e.got = append(e.got, ev); e.mu.Unlock() }

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.got {
		out = append(out, ev.Kind+"/"+ev.Subject)
	}
	return out
}

func TestEveryCredentialCoolingIsToldOnce(t *testing.T) {
	ev := &events{}
	limited := true
	var mu sync.Mutex
	r, p, _, _, clk := newTestRouter(t, func(o *Options) {
		threeProfiles(o)
		o.Events = ev
		o.Fallbacks = []string{"q/other"}
	})
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		if limited {
			return nil, &core.Error{Kind: core.KindRateLimited, Msg: "429"}
		}
		return &provider.Response{Text: "ok"}, nil
	}
	ctx := context.Background()
	res, err := r.Chat(ctx, Call{Req: userMsg("hi")})
	if err != nil || res.Model != "q/other" {
		t.Fatalf("chat = %+v %v; want the fallback", res, err)
	}
	if got := ev.kinds(); len(got) != 1 || got[0] != "provider_cooling/p" {
		t.Fatalf("events = %v; want one provider_cooling for p (after the third credential)", got)
	}
	// Still cooling: not told again.
	clk.Advance(2 * time.Minute)
	r.Chat(ctx, Call{Req: userMsg("hi")})
	if n := len(ev.kinds()); n != 1 {
		t.Fatalf("%d events while still cooling", n)
	}
	// A success ends the episode; the next one is told again.
	mu.Lock()
	limited = false
	mu.Unlock()
	clk.Advance(time.Hour)
	if res, err := r.Chat(ctx, Call{Req: userMsg("hi")}); err != nil || res.Model != "p/cheap" {
		t.Fatalf("recovered chat = %+v %v", res, err)
	}
	mu.Lock()
	limited = true
	mu.Unlock()
	clk.Advance(2 * time.Hour)
	r.Chat(ctx, Call{Req: userMsg("hi")})
	if n := len(ev.kinds()); n != 2 {
		t.Fatalf("%d events; want a second one for the second episode", n)
	}
	ev.mu.Lock()
	msg := ev.got[0].Message
	ev.mu.Unlock()
	if !strings.Contains(msg, "every credential of provider p") || strings.Contains(msg, "key-a") {
		t.Fatalf("message %q", msg)
	}
}

func TestBudgetLevelsAreToldOncePerDay(t *testing.T) {
	ctx := context.Background()
	ev := &events{}
	r, _, _, st, clk := newTestRouter(t, func(o *Options) {
		o.Catalog = append(o.Catalog, Model{Ref: "q/free", Weight: 1, Local: true})
		o.DailyUSD = 1
		o.Events = ev
	})
	conv := core.ConversationKey{Channel: "console", Chat: "c"}
	spend := func(usd float64) {
		st.AddUsage(ctx, core.UsageRecord{At: clk.Now(), Conversation: conv.String(), Model: "p/big", CostUSD: usd})
	}
	chat := func() { r.Chat(ctx, Call{Conversation: conv, Req: userMsg("hi")}) }
	spend(0.5)
	chat()
	if n := len(ev.kinds()); n != 0 {
		t.Fatalf("events at 50%%: %v", ev.kinds())
	}
	spend(0.35)
	chat()
	chat()
	spend(0.2)
	chat()
	chat()
	got := ev.kinds()
	if len(got) != 2 || !strings.HasPrefix(got[0], "budget_warning/routing.budget.daily_usd") || !strings.HasPrefix(got[1], "budget_exhausted/routing.budget.daily_usd") {
		t.Fatalf("events = %v; want one warning at 80%% and one at 100%%", got)
	}
	clk.Advance(24 * time.Hour)
	spend(0.9)
	chat()
	if n := len(ev.kinds()); n != 3 {
		t.Fatalf("%d events; want the next day's warning", n)
	}
}
