package routing

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

func TestPrecedence(t *testing.T) {
	tg := core.ConversationKey{Channel: "telegram", Chat: "42"}
	full := func(o *Options) {
		o.ChatModels = map[string]map[string]string{"telegram": {"42": "big"}}
		o.ChannelModels = map[string]string{"telegram": "q/other"}
		o.Pin = map[string]string{TaskCode: "p/mid"}
		o.Primary = "p/mid"
	}
	for _, tc := range []struct {
		name       string
		opts       func(*Options)
		call       Call
		signals    []core.Signal
		want       string
		wantReason string
	}{
		{"highest weight", nil, Call{Req: userMsg("hi")}, nil, "p/cheap", ReasonWeight},
		{"primary over weight", func(o *Options) { o.Primary = "mid" }, Call{Req: userMsg("hi")}, nil, "p/mid", ReasonPrimary},
		{"per request beats everything", full, Call{Model: "cheap", Conversation: tg, Session: &core.Session{ModelPin: "p/mid"}, Req: userMsg("```go\n```")}, nil, "p/cheap", ReasonRequest},
		{"conversation pin beats chat config", full, Call{Conversation: tg, Session: &core.Session{ModelPin: "p/mid"}, Req: userMsg("hi")}, nil, "p/mid", ReasonPin},
		{"chat config beats channel", full, Call{Conversation: tg, Req: userMsg("hi")}, nil, "p/big", ReasonChat},
		{"channel config beats task pin", full, Call{Conversation: core.ConversationKey{Channel: "telegram", Chat: "7"}, Req: userMsg("```go\nx\n```")}, nil, "q/other", ReasonChannel},
		{"task pin", full, Call{Conversation: core.ConversationKey{Channel: "console", Chat: "1"}, Req: userMsg("fix this python function")}, nil, "p/mid", ReasonTaskPin},
		{"affinity beats primary", func(o *Options) { o.Primary = "p/cheap" }, Call{Req: userMsg("hi")},
			negatives("p/cheap", TaskChat, 20), "", ReasonAffinity},
		{"affinity off falls to primary", func(o *Options) { o.Primary = "p/cheap"; o.NoAffinity = true }, Call{Req: userMsg("hi")},
			negatives("p/cheap", TaskChat, 20), "p/cheap", ReasonPrimary},
		{"escalation: next by weight", nil, Call{Exclude: []string{"p/cheap"}, Req: userMsg("hi")}, nil, "p/mid", ReasonEscalate},
		{"escalation skips excluded", nil, Call{Exclude: []string{"p/cheap", "p/mid"}, Req: userMsg("hi")}, nil, "q/other", ReasonEscalate},
		{"escalation keeps a strict pin", nil, Call{Session: &core.Session{ModelPin: "cheap"}, Exclude: []string{"p/cheap"}, Req: userMsg("hi")}, nil, "p/cheap", ReasonPin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _, _, _ := newTestRouter(t, tc.opts)
			for _, s := range tc.signals {
				if err := r.RecordSignal(context.Background(), s); err != nil {
					t.Fatal(err)
				}
			}
			res, err := r.Chat(context.Background(), tc.call)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && res.Model != tc.want {
				t.Errorf("model = %s (%s), want %s", res.Model, res.Reason, tc.want)
			}
			if tc.want == "" && res.Model == "p/cheap" {
				t.Errorf("affinity still chose the rejected model: %s", res.Reason)
			}
			if !strings.HasPrefix(res.Reason, tc.wantReason) {
				t.Errorf("reason = %q, want prefix %q", res.Reason, tc.wantReason)
			}
		})
	}
}

func negatives(model, task string, n int) []core.Signal {
	out := make([]core.Signal, n)
	for i := range out {
		out[i] = core.Signal{Kind: core.SignalRetry, Polarity: core.Negative, Model: model, TaskType: task, Weight: 1}
	}
	return out
}

func TestUnknownModelSuggests(t *testing.T) {
	r, _, _, _, _ := newTestRouter(t, nil)
	_, err := r.Chat(context.Background(), Call{Model: "chaep", Req: userMsg("hi")})
	if core.ErrorKind(err) != core.KindInvalid || !strings.Contains(err.Error(), "cheap") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"unknown primary", func(o *Options) { o.Primary = "p/nope" }, "routing.primary"},
		{"unknown pin", func(o *Options) { o.Pin = map[string]string{"code": "x"} }, "routing.pin.code"},
		{"missing provider", func(o *Options) { o.Catalog = append(o.Catalog, Model{Ref: "z/m"}) }, "models.providers"},
		{"bad weight", func(o *Options) { o.Catalog[0].Weight = 101 }, "weight"},
		{"duplicate alias", func(o *Options) { o.Catalog[1].Alias = "cheap" }, "alias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Providers: map[string]provider.Provider{"p": &fakeProvider{id: "p"}, "q": &fakeProvider{id: "q"}}, Catalog: testCatalog(), Store: NewMemStore()}
			tc.mod(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want mention of %s", err, tc.want)
			}
		})
	}
}
