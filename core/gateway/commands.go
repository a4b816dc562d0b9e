package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// commandSet is the registry of in-chat commands. It is built before the
// gateway runs and read-only after.
type commandSet struct {
	byName map[string]core.Command
}

func (s *commandSet) add(c core.Command) {
	if s.byName == nil {
		s.byName = map[string]core.Command{}
	}
	s.byName[strings.ToLower(c.Name)] = c
}

func (s *commandSet) infos() []core.CommandInfo {
	out := make([]core.CommandInfo, 0, len(s.byName))
	for _, c := range s.byName {
		if !c.Hidden {
			out = append(out, c.CommandInfo)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var _ core.CommandKnower = (*Gateway)(nil)

// KnowsCommand implements core.CommandKnower.
func (g *Gateway) KnowsCommand(name string) bool {
	_, ok := g.commands.byName[strings.ToLower(name)]
	return ok
}

func (g *Gateway) builtinCommands() []core.Command {
	return []core.Command{
		{CommandInfo: core.CommandInfo{Name: "help", Usage: "/help", Description: "List the commands"}, Run: g.cmdHelp, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "start", Usage: "/start", Description: "Say hello"}, Run: g.cmdHelp, Hidden: true, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "new", Usage: "/new", Description: "Start a fresh conversation"}, Run: g.cmdNew},
		{CommandInfo: core.CommandInfo{Name: "status", Usage: "/status", Description: "Model, messages and tokens of this conversation"}, Run: g.cmdStatus, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "model", Usage: "/model", Description: "Show the model in use"}, Run: g.cmdModel, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "stop", Usage: "/stop", Description: "Stop the answer being written"}, Run: g.cmdStop, Aside: true},
	}
}

func (g *Gateway) cmdHelp(_ context.Context, _ core.CommandRequest) (string, error) {
	var b strings.Builder
	b.WriteString("I am an AI assistant. Write to me in plain words; these commands are answered directly:\n")
	for _, c := range g.commands.infos() {
		fmt.Fprintf(&b, "%s — %s\n", c.Usage, c.Description)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func (g *Gateway) cmdNew(ctx context.Context, req core.CommandRequest) (string, error) {
	if _, err := g.store.NewSession(ctx, req.In.Conversation); err != nil {
		return "", err
	}
	return "Started a fresh conversation: earlier messages are no longer part of the context.", nil
}

func (g *Gateway) cmdModel(ctx context.Context, req core.CommandRequest) (string, error) {
	if req.Args != "" {
		return "Switching models is not available in this build: /model only shows the model in use.", nil
	}
	model, reason := g.currentModel(ctx, req.Session)
	return fmt.Sprintf("Model: %s (%s)", model, reason), nil
}

func (g *Gateway) cmdStatus(ctx context.Context, req core.CommandRequest) (string, error) {
	n, err := g.store.MessageCount(ctx, req.Session.ID)
	if err != nil {
		return "", err
	}
	model, reason := g.currentModel(ctx, req.Session)
	u := req.Session.Usage
	var out strings.Builder
	fmt.Fprintf(&out, "Model: %s (%s)\n", model, reason)
	fmt.Fprintf(&out, "Session: %d messages since %s", n, req.Session.CreatedAt.UTC().Format("2006-01-02 15:04 MST"))
	if cr, ok := g.agent.(core.ContextReporter); ok {
		// On the Session line: a line more would shift what a reader of
		// /status's lines finds after it.
		if c := cr.ContextUse(ctx, req.Session); c != "" {
			fmt.Fprintf(&out, " (%s)", c)
		}
	}
	out.WriteString("\n")
	fmt.Fprintf(&out, "Tokens: %d in, %d out", u.InputTokens, u.OutputTokens)
	if u.CostUSD > 0 {
		fmt.Fprintf(&out, " ($%.4f)", u.CostUSD)
	}
	if sr, ok := g.agent.(core.StatusReporter); ok {
		for _, l := range sr.SessionStatus(ctx, req.Session) {
			out.WriteString("\n" + l)
		}
	}
	if b := req.Behind; b != nil && b.Waiting > 0 {
		wait := core.HumanDuration(b.Next.Sub(g.now()))
		if b.Waiting == 1 {
			fmt.Fprintf(&out, "\nWaiting: 1 earlier message, tried again in about %s", wait)
		} else {
			fmt.Fprintf(&out, "\nWaiting: %d earlier messages, the first tried again in about %s", b.Waiting, wait)
		}
	}
	if ch, ok := g.channels[req.In.Conversation.Channel].(core.HealthReporter); ok {
		// The bot's last update, not only this replica's: of replicas on
		// one database the command may reach one that receives nothing
		// itself (another holds the poller) or did long ago, through the
		// shared queue; the command itself was an update then.
		t := ch.LastEvent()
		if req.Queued.After(t) {
			t = req.Queued
		}
		if !t.IsZero() {
			fmt.Fprintf(&out, "\n%s: last update %s ago", req.In.Conversation.Channel, max(g.now().Sub(t), 0).Round(time.Second))
		}
	}
	return out.String(), nil
}

func (g *Gateway) currentModel(ctx context.Context, s core.Session) (model, reason string) {
	if mr, ok := g.agent.(core.ModelReporter); ok {
		return mr.CurrentModel(ctx, s)
	}
	return "unknown", "no router"
}
