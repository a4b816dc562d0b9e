package routing

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
)

// adminRig is a router with the config's budgets of $5 a day and $0.50 a
// conversation and the allowlist cheap, p/mid, some settings already made
// in chat (pre), and $1.23 spent today, $0.10 of it in the conversation.
func adminRig(t *testing.T, pre map[string]string) (*Router, *MemStore, map[string]core.Command, core.Session) {
	t.Helper()
	r, _, _, st, clk := newTestRouter(t, func(o *Options) {
		o.DailyUSD, o.ChatDailyUSD = 5, 0.5
		o.Allowed = []string{"cheap", "p/mid"}
	})
	ctx := context.Background()
	for k, v := range pre {
		if err := st.SetSetting(ctx, core.Setting{Key: k, Value: v, UpdatedBy: "telegram:7", UpdatedAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	s := core.Session{ID: 3, Conversation: core.ConversationKey{Channel: "telegram", Chat: "42"}}
	st.AddUsage(ctx, core.UsageRecord{At: clk.Now(), Conversation: s.Conversation.String(), Model: "p/mid", CostUSD: 0.10})
	st.AddUsage(ctx, core.UsageRecord{At: clk.Now(), Conversation: "telegram:99", Model: "p/mid", CostUSD: 1.13})
	// Yesterday's spend is not today's.
	st.AddUsage(ctx, core.UsageRecord{At: clk.Now().Add(-24 * time.Hour), Conversation: s.Conversation.String(), Model: "p/mid", CostUSD: 7})
	cmds := map[string]core.Command{}
	for _, c := range r.Commands(nopPinner{}, noConversations{}) {
		cmds[c.Name] = c
	}
	return r, st, cmds, s
}

// settingsOf is the store's settings as key → value.
func settingsOf(t *testing.T, st *MemStore) map[string]string {
	t.Helper()
	ss, err := st.Settings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range ss {
		out[s.Key] = s.Value
	}
	return out
}

type adminCase struct {
	name  string
	pre   map[string]string
	args  string
	admin bool
	// want are parts of the answer; exact, when set, is all of it.
	want  []string
	exact string
	// after is the settings stored afterwards (nil = pre unchanged).
	after map[string]string
}

func runAdminCases(t *testing.T, command string, cases []adminCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, st, cmds, s := adminRig(t, tc.pre)
			out, err := cmds[command].Run(context.Background(), core.CommandRequest{Session: s, Args: tc.args, Admin: tc.admin,
				In: core.Inbound{Conversation: s.Conversation, UserID: "7"}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.exact != "" && out != tc.exact {
				t.Errorf("/%s %s = %q; want %q", command, tc.args, out, tc.exact)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("/%s %s = %q; want it to contain %q", command, tc.args, out, w)
				}
			}
			want := tc.after
			if want == nil {
				want = tc.pre
			}
			if got := settingsOf(t, st); !maps.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("after /%s %s the settings are %v; want %v", command, tc.args, got, want)
			}
		})
	}
}

func TestBudgetCommand(t *testing.T) {
	daily1 := map[string]string{KeyDailyUSD: "1"}
	both := map[string]string{KeyDailyUSD: "1", KeyChatDailyUSD: "0"}
	runAdminCases(t, "budget", []adminCase{
		{name: "view", exact: "Today (UTC): $1.23 of $5.00 (routing.budget.daily_usd); this conversation: $0.10 of $0.50 (routing.budget.chat_daily_usd)."},
		{name: "view as an admin", admin: true, want: []string{"$1.23 of $5.00", "\n" + budgetUsage}},
		{name: "view set in chat", pre: both, want: []string{
			"Today (UTC): $1.23 of $1.00 (routing.budget.daily_usd, set in chat by telegram:7 on 2026-03-01 12:00 UTC)",
			"this conversation: $0.10, no budget per conversation (routing.budget.chat_daily_usd, set in chat by telegram:7",
			"The config's: routing.budget.daily_usd $5.00, routing.budget.chat_daily_usd $0.50."}},
		{name: "set daily", admin: true, args: "daily 2", want: []string{"daily budget is now $2.00 (routing.budget.daily_usd) until /budget default"},
			after: map[string]string{KeyDailyUSD: "2"}},
		{name: "set daily in dollars", admin: true, args: "daily $0.75", after: map[string]string{KeyDailyUSD: "0.75"}},
		{name: "daily off", admin: true, args: "DAILY off", want: []string{"daily budget is off"}, after: map[string]string{KeyDailyUSD: "0"}},
		{name: "set chat", admin: true, pre: daily1, args: "chat 1.5", want: []string{"conversation is now $1.50 (routing.budget.chat_daily_usd)"},
			after: map[string]string{KeyDailyUSD: "1", KeyChatDailyUSD: "1.5"}},
		{name: "chat off", admin: true, args: "chat off", after: map[string]string{KeyChatDailyUSD: "0"}},
		{name: "default", admin: true, pre: both, args: "default", want: []string{"Back to the config's budgets"}, after: map[string]string{}},
		{name: "default without settings", admin: true, args: "default", want: []string{"the config's already"}},
		{name: "non-admin set", pre: daily1, args: "daily 100", exact: "Only an admin of this telegram bot can change the budget."},
		{name: "non-admin off", args: "chat off", exact: "Only an admin of this telegram bot can change the budget."},
		{name: "non-admin default", pre: daily1, args: "default", exact: "Only an admin of this telegram bot can change the budget."},
		{name: "negative", admin: true, args: "daily -1", exact: budgetUsage},
		{name: "not a number", admin: true, args: "daily lots", exact: budgetUsage},
		{name: "not a number either", admin: true, args: "chat NaN", exact: budgetUsage},
		{name: "infinite", admin: true, args: "daily inf", exact: budgetUsage},
		{name: "no amount", admin: true, args: "daily", exact: budgetUsage},
		{name: "two amounts", admin: true, args: "daily 1 2", exact: budgetUsage},
		{name: "default with more", admin: true, pre: daily1, args: "default now", exact: budgetUsage},
		{name: "unknown subcommand", admin: true, args: "weekly 3", exact: budgetUsage},
		{name: "unknown subcommand of a non-admin", args: "weekly 3", exact: budgetUsage},
	})
}

func TestAllowedCommand(t *testing.T) {
	mine := map[string]string{KeyAllowed: `["p/cheap"]`}
	runAdminCases(t, "allowed", []adminCase{
		{name: "view", exact: "/model may pick p/cheap (cheap), p/mid (mid) (routing.allowed)."},
		{name: "view as an admin", admin: true, want: []string{"\n" + allowedUsage}},
		{name: "view set in chat", pre: mine, exact: "/model may pick p/cheap (cheap) (routing.allowed, set in chat by telegram:7 on 2026-03-01 12:00 UTC; the config's: p/cheap (cheap), p/mid (mid))."},
		{name: "view all set in chat", pre: map[string]string{KeyAllowed: `[]`}, want: []string{"/model may pick any model of the catalog (routing.allowed, set in chat"}},
		{name: "add", admin: true, args: "add big", want: []string{"Added p/big: /model may pick p/cheap (cheap), p/mid (mid), p/big (big)"},
			after: map[string]string{KeyAllowed: `["p/cheap","p/mid","p/big"]`}},
		{name: "add by ref", admin: true, pre: mine, args: "add q/other", after: map[string]string{KeyAllowed: `["p/cheap","q/other"]`}},
		{name: "add to all", admin: true, pre: map[string]string{KeyAllowed: `[]`}, args: "add mid", after: map[string]string{KeyAllowed: `["p/mid"]`}},
		{name: "add again", admin: true, args: "add cheap", want: []string{"p/cheap is allowed already"}},
		{name: "add unknown", admin: true, args: "add bgi", want: []string{`Unknown model "bgi"`, "did you mean big (p/big)"}},
		{name: "remove", admin: true, args: "remove mid", want: []string{"Removed p/mid: /model may pick p/cheap (cheap)"},
			after: map[string]string{KeyAllowed: `["p/cheap"]`}},
		{name: "remove from all", admin: true, pre: map[string]string{KeyAllowed: `[]`}, args: "remove cheap",
			after: map[string]string{KeyAllowed: `["p/mid","q/other","p/big"]`}},
		{name: "remove one not allowed", admin: true, args: "remove big", want: []string{"p/big is not allowed already"}},
		{name: "remove the last", admin: true, pre: mine, args: "remove cheap", want: []string{"p/cheap is the only model /model may pick"}},
		{name: "remove unknown", admin: true, args: "remove nope", want: []string{`Unknown model "nope"`}},
		{name: "all", admin: true, args: "all", want: []string{"any model of the catalog now"}, after: map[string]string{KeyAllowed: `[]`}},
		{name: "default", admin: true, pre: mine, args: "default", want: []string{"Back to routing.allowed: /model may pick p/cheap (cheap), p/mid (mid)."}, after: map[string]string{}},
		{name: "default without a setting", admin: true, args: "default", want: []string{"routing.allowed's already"}},
		{name: "non-admin add", args: "add big", exact: "Only an admin of this telegram bot can change the models /model may pick."},
		{name: "non-admin all", pre: mine, args: "all", exact: "Only an admin of this telegram bot can change the models /model may pick."},
		{name: "non-admin default", pre: mine, args: "default", exact: "Only an admin of this telegram bot can change the models /model may pick."},
		{name: "add nothing", admin: true, args: "add", exact: allowedUsage},
		{name: "add two", admin: true, args: "add big mid", exact: allowedUsage},
		{name: "all with more", admin: true, args: "all models", exact: allowedUsage},
		{name: "unknown subcommand", admin: true, args: "allow big", exact: allowedUsage},
	})
}

// TestChatSetBudgetDecides: the router's choice follows a budget set with
// /budget (over a config without one) until /budget default, and one set
// on another replica (straight into the shared store) within
// Options.SharedProfiles.
func TestChatSetBudgetDecides(t *testing.T) {
	ctx := context.Background()
	logs := &lockedLog{}
	r, _, _, st, clk := newTestRouter(t, func(o *Options) {
		o.Catalog = append(o.Catalog, Model{Ref: "q/free", Weight: 1, Local: true})
		o.Primary = "p/big"
		o.SharedProfiles = time.Second
		o.Log = slog.New(slog.NewTextHandler(logs, nil))
	})
	cmds := map[string]core.Command{}
	for _, c := range r.Commands(nopPinner{}, noConversations{}) {
		cmds[c.Name] = c
	}
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	admin := core.CommandRequest{Admin: true, Session: core.Session{ID: 1, Conversation: conv}, In: core.Inbound{Conversation: conv, UserID: "7"}}
	budget := func(args string) {
		t.Helper()
		req := admin
		req.Args = args
		if _, err := cmds["budget"].Run(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	model := func() (string, string) {
		t.Helper()
		res, err := r.Chat(ctx, Call{Conversation: conv, Req: userMsg("hi")})
		if err != nil {
			t.Fatal(err)
		}
		return res.Model, res.Reason
	}
	st.AddUsage(ctx, core.UsageRecord{At: clk.Now(), Conversation: conv.String(), Model: "p/big", CostUSD: 0.85})
	if m, _ := model(); m != "p/big" {
		t.Fatalf("without a budget %s answered; want p/big", m)
	}
	budget("daily 1")
	if m, why := model(); m != "q/free" || !strings.Contains(why, "routing.budget.daily_usd ($1.00, set with /budget)") {
		t.Fatalf("with /budget daily 1 after $0.85: %s (%s); want q/free for the budget set in chat", m, why)
	}
	// Who changed what is logged.
	if want := `msg="setting changed in chat" component=routing key=routing.budget.daily_usd value=1 by=telegram:7 conversation=telegram:42`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs.String())
	}
	budget("default")
	if want := `msg="setting made in chat dropped: the config's value holds again" component=routing key=routing.budget.daily_usd by=telegram:7`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs.String())
	}
	if strings.Contains(logs.String(), "key=routing.budget.chat_daily_usd") {
		t.Errorf("the log tells of dropping a budget that was not set:\n%s", logs.String())
	}
	if m, _ := model(); m != "p/big" {
		t.Fatalf("after /budget default %s answered; want p/big again", m)
	}

	// Another replica sets a budget per conversation: seen here within a
	// second, not before.
	if err := st.SetSetting(ctx, core.Setting{Key: KeyChatDailyUSD, Value: "0.5", UpdatedBy: "slack:U1"}); err != nil {
		t.Fatal(err)
	}
	if m, _ := model(); m != "p/big" {
		t.Fatalf("the other replica's budget held before the next read: %s answered", m)
	}
	clk.Advance(time.Second)
	if m, why := model(); m != "q/free" || !strings.Contains(why, "routing.budget.chat_daily_usd ($0.50, set with /budget)") {
		t.Fatalf("a second after another replica's /budget chat 0.5: %s (%s); want q/free", m, why)
	}
}

// TestChatSetAllowlistDecides: a model taken off the list with /allowed
// can no longer be pinned, and a conversation pinned to it before is
// answered by the router's own choice until /allowed default.
func TestChatSetAllowlistDecides(t *testing.T) {
	ctx := context.Background()
	r, _, _, _, _ := newTestRouter(t, nil)
	cmds := map[string]core.Command{}
	for _, c := range r.Commands(nopPinner{}, noConversations{}) {
		cmds[c.Name] = c
	}
	conv := core.ConversationKey{Channel: "telegram", Chat: "42"}
	pinned := core.Session{ID: 1, Conversation: conv, ModelPin: "p/big"}
	run := func(name, args string) string {
		t.Helper()
		out, err := cmds[name].Run(ctx, core.CommandRequest{Admin: true, Args: args, Session: pinned, In: core.Inbound{Conversation: conv, UserID: "7"}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if m, why := r.CurrentModel(ctx, pinned); m != "p/big" || !strings.HasPrefix(why, ReasonPin) {
		t.Fatalf("pinned to p/big: %s (%s)", m, why)
	}
	run("allowed", "remove big")
	if m, why := r.CurrentModel(ctx, pinned); m == "p/big" || !strings.Contains(why, "the /model pin p/big is not allowed any more") {
		t.Fatalf("after /allowed remove big the pinned conversation gets %s (%s); want the router's choice", m, why)
	}
	res, err := r.Chat(ctx, Call{Session: &pinned, Req: userMsg("hi")})
	if err != nil || res.Model == "p/big" {
		t.Fatalf("a pinned chat after /allowed remove big: %s, %v; want another model", res.Model, err)
	}
	if out := run("model", "big"); !strings.Contains(out, "p/big is not allowed here") {
		t.Fatalf("/model big after /allowed remove big = %q; want it refused", out)
	}
	run("allowed", "default")
	if m, _ := r.CurrentModel(ctx, pinned); m != "p/big" {
		t.Fatalf("after /allowed default: %s; want the pin p/big again", m)
	}
}

// lockedLog is a log's text, written from any goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
