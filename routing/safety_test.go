package routing

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

func onlyProfile(o *Options) {
	o.Profiles = map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}}}
}

func chatKey(chat string) core.ConversationKey {
	return core.ConversationKey{Channel: "telegram", Chat: chat}
}

// TestOneSlowRequestDoesNotCoolTheCredential: the timeouts of one
// request (tried again and again) leave the shared credential usable;
// timeouts of two different requests cool it.
func TestOneSlowRequestDoesNotCoolTheCredential(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, onlyProfile)
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		if req.Messages[len(req.Messages)-1].Content == "write a 15000-word essay" {
			return nil, &core.Error{Kind: core.KindTimeout, Msg: "no answer in time"}
		}
		return &provider.Response{Text: "ok"}, nil
	}
	ctx := context.Background()
	for i := range 3 { // the gateway retries the request
		if _, err := r.Chat(ctx, Call{Conversation: chatKey("essayist"), Req: userMsg("write a 15000-word essay")}); core.ErrorKind(err) != core.KindTimeout {
			t.Fatalf("attempt %d: err = %v, want a timeout", i, err)
		}
		if cd := r.Profiles("p")[0].CooldownUntil; cd.After(clk.Now()) {
			t.Fatalf("attempt %d of one slow request cooled the only credential until %s", i, cd)
		}
		clk.Advance(time.Second)
		if res, err := r.Chat(ctx, Call{Conversation: chatKey("other"), Req: userMsg("hi")}); err != nil || res.Text != "ok" {
			t.Fatalf("another conversation after the slow request: %v", err)
		}
	}
	// Timeouts of different requests (the provider hangs for everyone)
	// do cool it.
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindTimeout}
	}
	r.Chat(ctx, Call{Conversation: chatKey("a"), Req: userMsg("one")})
	if r.Profiles("p")[0].CooldownUntil.After(clk.Now()) {
		t.Fatal("cooled after the first request's timeout")
	}
	r.Chat(ctx, Call{Conversation: chatKey("b"), Req: userMsg("two")})
	if got := r.Profiles("p")[0].CooldownUntil.Sub(clk.Now()); got != time.Minute {
		t.Fatalf("after timeouts of two requests: cooldown %v, want 1m", got)
	}
}

// TestEveryRequestCarriesMaxTokens: the catalog's max_output_tokens, or
// the default (at most half a known context window), caps each answer; a
// caller's smaller cap is kept.
func TestEveryRequestCarriesMaxTokens(t *testing.T) {
	r, p, _, _, _ := newTestRouter(t, func(o *Options) {
		o.Catalog[1].MaxOutputTokens = 1500 // p/mid
		o.Catalog[2].ContextWindow = 0      // p/big: unknown window
	})
	var got []int
	p.fn = func(_ provider.Credentials, req *provider.Request) (*provider.Response, error) {
		got = append(got, req.MaxTokens)
		return &provider.Response{Text: "ok"}, nil
	}
	ctx := context.Background()
	for _, c := range []Call{
		{Model: "mid", Req: userMsg("hi")},
		{Model: "big", Req: userMsg("hi")},
		{Model: "cheap", Req: userMsg("hi")}, // context window 8000
		{Model: "mid", Req: provider.Request{Messages: userMsg("hi").Messages, MaxTokens: 200}},
		{Model: "mid", Req: provider.Request{Messages: userMsg("hi").Messages, MaxTokens: 90000}},
	} {
		if _, err := r.Chat(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	want := []int{1500, DefaultMaxOutputTokens, 4000, 200, 1500}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("max_tokens sent = %v, want %v", got, want)
		}
	}
}

// TestSpentBudgetCallsNoPaidModel: with the budget used up and a free
// model chosen, a failure of the free model does not fall back to a paid
// one.
func TestSpentBudgetCallsNoPaidModel(t *testing.T) {
	ctx := context.Background()
	r, p, q, st, clk := newTestRouter(t, func(o *Options) {
		o.Catalog = append(o.Catalog, Model{Ref: "q/free", Weight: 95, Local: true})
		o.Primary = "q/free"
		o.Fallbacks = []string{"p/cheap", "p/mid"}
		o.DailyUSD = 1
	})
	st.AddUsage(ctx, core.UsageRecord{At: clk.Now(), Model: "p/big", CostUSD: 1.5})
	q.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindUnavailable, Msg: "local server down"}
	}
	_, err := r.Chat(ctx, Call{Conversation: chatKey("c"), Req: userMsg("hi")})
	if err == nil {
		t.Fatal("a call succeeded with the free model down and the budget spent")
	}
	if n := len(p.Calls()); n != 0 {
		t.Fatalf("paid models were called %d times with the budget spent: %v", n, p.Calls())
	}
	// Under budget the paid fallbacks are used as usual.
	clk.Advance(24 * time.Hour)
	if res, err := r.Chat(ctx, Call{Conversation: chatKey("c"), Req: userMsg("hi")}); err != nil || res.Model != "p/cheap" {
		t.Fatalf("next day: %s %v", res.Model, err)
	}
}

// TestUnpricedModelWarnedOnceWithBudget names, once at start, a model
// without a price that is not local while a budget is set.
func TestUnpricedModelWarnedOnceWithBudget(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	newTestRouter(t, func(o *Options) {
		o.Catalog = append(o.Catalog, Model{Ref: "q/unpriced", Weight: 5}, Model{Ref: "q/local", Weight: 5, Local: true})
		o.ChatDailyUSD = 2
		o.Log = log
	})
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "q/unpriced") || strings.Contains(out, "q/local") || !strings.Contains(out, "cost") {
		t.Fatalf("want one warning naming q/unpriced (and not the local model):\n%s", out)
	}
	logs.Reset()
	newTestRouter(t, func(o *Options) {
		o.Catalog = append(o.Catalog, Model{Ref: "q/unpriced", Weight: 5})
		o.Log = log
	})
	if logs.Len() != 0 {
		t.Fatalf("warned without a budget:\n%s", logs.String())
	}
}

// TestRetryAfterSetsTheCooldown: a server's Retry-After is the cooldown,
// shorter or longer than the ladder's step; without one the ladder holds.
func TestRetryAfterSetsTheCooldown(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, onlyProfile)
	ra := time.Second
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindRateLimited, RetryAfter: ra}
	}
	ctx := context.Background()
	r.Chat(ctx, Call{Req: userMsg("hi")})
	if got := r.Profiles("p")[0].CooldownUntil.Sub(clk.Now()); got != time.Second {
		t.Fatalf("429 with Retry-After 1s: cooldown %v, want 1s", got)
	}
	clk.Advance(time.Second)
	ra = 0
	r.Chat(ctx, Call{Req: userMsg("hi")})
	if got := r.Profiles("p")[0].CooldownUntil.Sub(clk.Now()); got != 5*time.Minute {
		t.Fatalf("second 429 without Retry-After: cooldown %v, want the ladder's 5m", got)
	}
}

// TestCoolingCauseIsReported: when every profile cools because of
// timeouts, the router's error is a timeout with the earliest free time,
// not a rate limit.
func TestCoolingCauseIsReported(t *testing.T) {
	r, p, _, _, clk := newTestRouter(t, onlyProfile)
	p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) {
		return nil, &core.Error{Kind: core.KindTimeout}
	}
	ctx := context.Background()
	r.Chat(ctx, Call{Conversation: chatKey("a"), Req: userMsg("one")})
	r.Chat(ctx, Call{Conversation: chatKey("b"), Req: userMsg("two")}) // cools p:a for 1m
	clk.Advance(10 * time.Second)
	n := len(p.Calls())
	_, err := r.Chat(ctx, Call{Model: "cheap", Conversation: chatKey("c"), Req: userMsg("three")})
	if len(p.Calls()) != n {
		t.Fatal("a cooling profile was called")
	}
	if k := core.ErrorKind(err); k != core.KindTimeout {
		t.Fatalf("kind %s (%v), want timeout", k, err)
	}
	if got := core.RetryAfter(err); got != 50*time.Second {
		t.Fatalf("RetryAfter %v, want 50s (the earliest free time)", got)
	}
	if msg := core.UserMessage(err); strings.Contains(msg, "rate limit") {
		t.Fatalf("user told %q", msg)
	}
}
