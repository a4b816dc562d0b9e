package routing

import (
	"context"
	"fmt"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

// The use of a profile is persisted after the attempt (not before the LLM
// request): on success, on a failure that cools the profile, and on one
// that does not.
func TestProfileUsePersistedAfterAttempt(t *testing.T) {
	tests := []struct {
		name string
		fail error // nil = success
		want core.ProfileState
	}{
		{name: "success", want: core.ProfileState{Uses: 1}},
		{name: "rate limited", fail: &core.Error{Kind: core.KindRateLimited, Msg: "429"}, want: core.ProfileState{Uses: 1, Failures: 1, LastError: "rate_limited"}},
		// A refusal moves to the next model, here on the same profile.
		{name: "bad request", fail: &core.Error{Kind: core.KindBadRequest, Msg: "400"}, want: core.ProfileState{Uses: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, p, _, st, clk := newTestRouter(t, func(o *Options) {
				o.Profiles = map[string][]Profile{"p": {{ID: "p:a", Provider: "p", Key: "key-a"}}}
			})
			if tt.fail != nil {
				p.fn = func(provider.Credentials, *provider.Request) (*provider.Response, error) { return nil, tt.fail }
			}
			r.Chat(context.Background(), Call{Req: userMsg("hi")})
			states, err := st.ProfileStates(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got *core.ProfileState
			for i := range states {
				if states[i].ID == "p:a" {
					got = &states[i]
				}
			}
			if got == nil {
				t.Fatalf("profile p:a not persisted; stored %+v", states)
			}
			if got.Uses != tt.want.Uses || !got.LastUsed.Equal(clk.Now()) || got.Failures != tt.want.Failures || got.LastError != tt.want.LastError {
				t.Fatalf("stored %+v, want uses %d, last used %v, failures %d, last error %q", *got, tt.want.Uses, clk.Now(), tt.want.Failures, tt.want.LastError)
			}
		})
	}
}

// limitConv honours History's limit, as the store does.
type limitConv struct {
	fakeConv
	limits []int
}

func (c *limitConv) History(_ context.Context, _ int64, limit int) ([]core.ChatMessage, error) {
	c.limits = append(c.limits, limit)
	h := c.hist
	if len(h) > limit {
		h = h[len(h)-limit:]
	}
	return h, nil
}

// The escalator finds the question behind a tail of tool messages longer
// than its first, short history read, and reads only the short tail when
// the question is there.
func TestLastQuestionBehindToolTail(t *testing.T) {
	tool := []core.ChatMessage{
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "1", Plugin: "p", Action: "a"}}},
		{Role: core.RoleTool, ToolCallID: "1", Content: "r1"},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "2", Plugin: "p", Action: "a"}}},
		{Role: core.RoleTool, ToolCallID: "2", Content: "r2"},
		{Role: core.RoleAssistant, Content: "done"},
	}
	tests := []struct {
		name       string
		hist       []core.ChatMessage
		wantLimits string
	}{
		{"short tail", []core.ChatMessage{{Role: core.RoleUser, Content: "old"}, {Role: core.RoleUser, Content: "what is a monad"}, {Role: core.RoleAssistant, Content: "a burrito"}}, "[4]"},
		{"tool tail", append([]core.ChatMessage{{Role: core.RoleUser, Content: "what is a monad"}}, tool...), "[4 50]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _, _, _ := newTestRouter(t, func(o *Options) { o.MaxEscalations = 2 })
			agent := &routerAgent{r: r}
			conv := &limitConv{fakeConv: fakeConv{last: &core.Reply{ID: 10, Model: "p/cheap", TaskType: TaskChat}, hist: tt.hist}}
			e := NewEscalator(r, conv, nil)
			req := core.CommandRequest{RequestID: 1, Session: core.Session{ID: 3}, In: core.Inbound{Text: "/retry", UserID: "u"}}
			d, err := e.Intercept(context.Background(), req)
			if _, handled := agent.play(t, req, d, err); !handled {
				t.Fatal("/retry was not taken")
			}
			if len(agent.turns) != 1 || agent.turns[0].Text != "what is a monad" {
				t.Fatalf("turns = %+v, want one re-asking %q", agent.turns, "what is a monad")
			}
			if got := fmt.Sprint(conv.limits); got != tt.wantLimits {
				t.Fatalf("history limits read = %s, want %s", got, tt.wantLimits)
			}
		})
	}
}
