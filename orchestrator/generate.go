package orchestrator

import (
	"context"
	"strings"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/plugins"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
)

// Generator adapts the routed LLM to plugins.Generator for
// POST /api/plugins/llm/generate: every call goes through the router and
// so through its local/cloud semaphores.
type Generator struct {
	LLM LLM
	// Purpose tags the usage ledger (default "plugin").
	Purpose string
}

var _ plugins.Generator = Generator{}

// Generate implements plugins.Generator. System messages become the
// system prompt; model is an alias or ref ("" = routed).
func (g Generator) Generate(ctx context.Context, messages []core.ChatMessage, model string) (string, error) {
	var system []string
	var msgs []core.ChatMessage
	for _, m := range messages {
		if m.Role == core.RoleSystem {
			system = append(system, m.Content)
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return "", core.Errorf(core.KindInvalid, "messages hold only system messages: add a user message")
	}
	purpose := g.Purpose
	if purpose == "" {
		purpose = "plugin"
	}
	res, err := g.LLM.Chat(ctx, routing.Call{
		Purpose: purpose,
		Model:   model,
		Req:     provider.Request{System: strings.Join(system, "\n\n"), Messages: msgs},
	})
	if err != nil {
		return "", err
	}
	if res.Response == nil {
		return "", core.Errorf(core.KindMalformed, "model %s returned no answer", res.Model)
	}
	return res.Text, nil
}
