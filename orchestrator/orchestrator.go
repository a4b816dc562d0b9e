package orchestrator

import (
	"context"
	"log/slog"
	"strings"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
)

// LLM is what the orchestrator needs from routing: one routed LLM call.
type LLM interface {
	Chat(ctx context.Context, c routing.Call) (routing.Result, error)
	// ContextWindow is the model's window in tokens ("" = the smallest
	// window a routed call may land on); 0 = unknown.
	ContextWindow(ref string) int
}

// History is what the orchestrator reads of a session.
type History interface {
	History(ctx context.Context, sessionID int64, limit int) ([]core.ChatMessage, error)
}

// Options configure an Orchestrator.
type Options struct {
	LLM     LLM
	History History
	// Rules are orchestrator.rules: appended to the built-in safety rules.
	Rules []string
	// MaxSteps bounds LLM calls per turn in the tool loop (default 10).
	MaxSteps int
	// Tools, when set, offers the plugins' actions to the LLM (tools.go).
	Tools ToolRunner
	// MaxHistory bounds the history entries loaded (default 200).
	MaxHistory int
	Logger     *slog.Logger
}

// Orchestrator answers turns. Safe for concurrent use.
type Orchestrator struct {
	o      Options
	log    *slog.Logger
	system string
}

var _ core.Agent = (*Orchestrator)(nil)

// New builds an Orchestrator.
func New(o Options) *Orchestrator {
	if o.MaxSteps <= 0 {
		o.MaxSteps = 10
	}
	if o.MaxHistory <= 0 {
		o.MaxHistory = 200
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Orchestrator{o: o, log: o.Logger.With("component", "orchestrator"), system: SystemPrompt(o.Rules)}
}

// CurrentModel implements core.ModelReporter when the LLM can tell.
func (o *Orchestrator) CurrentModel(ctx context.Context, s core.Session) (string, string) {
	if mr, ok := o.o.LLM.(core.ModelReporter); ok {
		return mr.CurrentModel(ctx, s)
	}
	return "unknown", "no router"
}

// Answer implements core.Agent.
func (o *Orchestrator) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	hist, err := o.o.History.History(ctx, t.Session.ID, o.o.MaxHistory)
	if err != nil {
		return core.Answer{}, err
	}
	var added []core.ChatMessage
	if t.Retry {
		// Re-answer the last question: drop what answered it before.
		hist = dropAfterLastUser(hist)
	} else {
		user := core.ChatMessage{Role: core.RoleUser, Content: t.Text}
		hist = append(hist, user)
		added = append(added, user)
	}
	system := o.system
	if o.o.Tools != nil {
		system = SystemPrompt(o.o.Rules, toolsSection(o.o.Tools.Tools()))
	}
	msgs := Trim(hist, o.budget(t), len(system))
	call := routing.Call{
		Purpose:      "chat",
		Session:      &t.Session,
		Conversation: t.In.Conversation,
		UserID:       t.In.UserID,
		Model:        t.Model,
		Exclude:      t.Exclude,
		Req:          provider.Request{System: system, Messages: msgs},
	}
	res, steps, err := o.loop(ctx, call, msgs)
	if err != nil {
		return core.Answer{}, err
	}
	if res.Response == nil || strings.TrimSpace(res.Text) == "" {
		return core.Answer{}, core.Errorf(core.KindMalformed, "model %s returned an empty answer", res.Model)
	}
	ans := core.Answer{Model: res.Model, TaskType: res.TaskType, Reason: res.Reason, Usage: res.Usage, Text: res.Text}
	added = append(added, steps...)
	ans.Messages = append(added, core.ChatMessage{Role: core.RoleAssistant, Content: res.Text})
	return ans, nil
}

// budget is the number of tokens the history may take: the context window
// less a reserve for the answer (a quarter of the window).
func (o *Orchestrator) budget(t core.Turn) int {
	ref := t.Model
	if ref == "" {
		ref = t.Session.ModelPin
	}
	w := o.o.LLM.ContextWindow(ref)
	if w <= 0 {
		w = 128_000
	}
	return w - w/4
}

func dropAfterLastUser(h []core.ChatMessage) []core.ChatMessage {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == core.RoleUser {
			return h[:i+1]
		}
	}
	return h
}

// EstimateTokens is a cheap token estimate: about four bytes per token,
// plus a small overhead per message.
func EstimateTokens(m core.ChatMessage) int {
	n := len(m.Content)/4 + 4
	for _, c := range m.ToolCalls {
		n += (len(c.Plugin) + len(c.Action) + 16) / 4
		for k, v := range c.Args {
			n += (len(k) + len(v)) / 4
		}
	}
	return n
}

// Trim keeps the newest messages that fit budget tokens (systemBytes of
// system prompt included). It never starts the kept history with a tool
// result or an assistant message, so tool calls keep their results and
// the history opens with a user message; the newest message is always kept.
func Trim(h []core.ChatMessage, budget, systemBytes int) []core.ChatMessage {
	used := systemBytes/4 + 8
	start := len(h)
	for i := len(h) - 1; i >= 0; i-- {
		cost := EstimateTokens(h[i])
		if used+cost > budget && i < len(h)-1 {
			break
		}
		used += cost
		start = i
	}
	for start < len(h)-1 && h[start].Role != core.RoleUser {
		start++
	}
	if start > 0 {
		return h[start:]
	}
	return h
}
