package core

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// CommandInfo describes an in-chat command for /help and for platforms
// that advertise commands.
type CommandInfo struct {
	Name        string // without the slash
	Usage       string // e.g. "/model [name|auto|@profile]"
	Description string
}

// CommandRequest is one invocation of an in-chat command.
type CommandRequest struct {
	RequestID int64
	In        Inbound
	Session   Session
	Args      string
	// Admin says the sender is an admin of the channel (a command that is
	// open to everyone may still do more for admins).
	Admin bool
}

// CommandFunc answers a command; the returned text is the reply.
type CommandFunc func(ctx context.Context, req CommandRequest) (string, error)

// Command is an in-chat command answered by core without the LLM.
type Command struct {
	CommandInfo
	Run CommandFunc
	// Hidden commands work but are not advertised.
	Hidden bool
	// Admin commands are refused to everyone but the channel's admins
	// (channels.<x>.admins).
	Admin bool
}

// commandSet is the registry of in-chat commands. It is built before the
// gateway runs and read-only after.
type commandSet struct {
	byName map[string]Command
}

func (s *commandSet) add(c Command) {
	if s.byName == nil {
		s.byName = map[string]Command{}
	}
	s.byName[strings.ToLower(c.Name)] = c
}

func (s *commandSet) infos() []CommandInfo {
	out := make([]CommandInfo, 0, len(s.byName))
	for _, c := range s.byName {
		if !c.Hidden {
			out = append(out, c.CommandInfo)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ParseCommand splits "/name[@bot] args" into name and args. It reports
// false when text is not shaped like a command (so "/etc/hosts?" is not).
func ParseCommand(text string) (name, args string, ok bool) {
	text = strings.TrimSpace(text)
	if len(text) < 2 || text[0] != '/' {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(head, "\n\t"); i >= 0 {
		rest = head[i+1:] + " " + rest
		head = head[:i]
	}
	head, _, _ = strings.Cut(head, "@")
	if head == "" || !unicode.IsLetter(rune(head[0])) {
		return "", "", false
	}
	for _, r := range head {
		if !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return "", "", false
		}
	}
	return strings.ToLower(head), strings.TrimSpace(rest), true
}

func (g *Gateway) builtinCommands() []Command {
	return []Command{
		{CommandInfo: CommandInfo{Name: "help", Usage: "/help", Description: "List the commands"}, Run: g.cmdHelp},
		{CommandInfo: CommandInfo{Name: "start", Usage: "/start", Description: "Say hello"}, Run: g.cmdHelp, Hidden: true},
		{CommandInfo: CommandInfo{Name: "new", Usage: "/new", Description: "Start a fresh conversation"}, Run: g.cmdNew},
		{CommandInfo: CommandInfo{Name: "status", Usage: "/status", Description: "Model, messages and tokens of this conversation"}, Run: g.cmdStatus},
		{CommandInfo: CommandInfo{Name: "model", Usage: "/model", Description: "Show the model in use"}, Run: g.cmdModel},
	}
}

func (g *Gateway) cmdHelp(_ context.Context, _ CommandRequest) (string, error) {
	var b strings.Builder
	b.WriteString("I am an AI assistant. Write to me in plain words; these commands are answered directly:\n")
	for _, c := range g.commands.infos() {
		fmt.Fprintf(&b, "%s — %s\n", c.Usage, c.Description)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func (g *Gateway) cmdNew(ctx context.Context, req CommandRequest) (string, error) {
	if _, err := g.store.NewSession(ctx, req.In.Conversation); err != nil {
		return "", err
	}
	return "Started a fresh conversation: earlier messages are no longer part of the context.", nil
}

func (g *Gateway) cmdModel(ctx context.Context, req CommandRequest) (string, error) {
	if req.Args != "" {
		return "Switching models is not available in this build: /model only shows the model in use.", nil
	}
	model, reason := g.currentModel(ctx, req.Session)
	return fmt.Sprintf("Model: %s (%s)", model, reason), nil
}

func (g *Gateway) cmdStatus(ctx context.Context, req CommandRequest) (string, error) {
	n, err := g.store.MessageCount(ctx, req.Session.ID)
	if err != nil {
		return "", err
	}
	model, reason := g.currentModel(ctx, req.Session)
	u := req.Session.Usage
	var b strings.Builder
	fmt.Fprintf(&b, "Model: %s (%s)\n", model, reason)
	fmt.Fprintf(&b, "Session: %d messages since %s\n", n, req.Session.CreatedAt.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Tokens: %d in, %d out", u.InputTokens, u.OutputTokens)
	if u.CostUSD > 0 {
		fmt.Fprintf(&b, " ($%.4f)", u.CostUSD)
	}
	if sr, ok := g.agent.(StatusReporter); ok {
		for _, l := range sr.SessionStatus(ctx, req.Session) {
			b.WriteString("\n" + l)
		}
	}
	if ch, ok := g.channels[req.In.Conversation.Channel].(HealthReporter); ok {
		if t := ch.LastEvent(); !t.IsZero() {
			fmt.Fprintf(&b, "\n%s: last update %s ago", req.In.Conversation.Channel, g.now().Sub(t).Round(1e9))
		}
	}
	return b.String(), nil
}

func (g *Gateway) currentModel(ctx context.Context, s Session) (model, reason string) {
	if mr, ok := g.agent.(ModelReporter); ok {
		return mr.CurrentModel(ctx, s)
	}
	return "unknown", "no router"
}

// StatusReporter is an optional Agent capability: lines about a
// session's orchestration state (recent tools, the model and profile of
// the latest answer, the active step) for /status.
type StatusReporter interface {
	SessionStatus(ctx context.Context, s Session) []string
}

// ModelReporter is an optional Agent capability: which model would answer
// the session's next message, and why.
type ModelReporter interface {
	CurrentModel(ctx context.Context, s Session) (model, reason string)
}
