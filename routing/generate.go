package routing

import (
	"context"
	"strings"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

var _ core.Generator = (*Router)(nil)

// Generate implements core.Generator: one routed call (failover, the
// semaphores and the ledger included) without tools.
func (r *Router) Generate(ctx context.Context, g core.GenerateRequest) (core.Generated, error) {
	var system []string
	var msgs []core.ChatMessage
	for _, m := range g.Messages {
		if m.Role == core.RoleSystem {
			system = append(system, m.Content)
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return core.Generated{}, core.Errorf(core.KindInvalid, "messages hold only system messages: add a user message")
	}
	purpose := g.Purpose
	if purpose == "" {
		purpose = "generate"
	}
	c := Call{
		Purpose:      purpose,
		Conversation: g.Conversation,
		UserID:       g.UserID,
		Model:        g.Model,
		Req:          provider.Request{System: strings.Join(system, "\n\n"), Messages: msgs, MaxTokens: g.MaxTokens},
	}
	if g.SessionID != 0 {
		c.Session = &core.Session{ID: g.SessionID, Conversation: g.Conversation}
	}
	res, err := r.Chat(ctx, c)
	if err != nil {
		return core.Generated{}, err
	}
	if res.Response == nil {
		return core.Generated{}, core.Errorf(core.KindMalformed, "model %s returned no answer", res.Model)
	}
	return core.Generated{Text: res.Text, Model: res.Model, Usage: res.Usage}, nil
}
