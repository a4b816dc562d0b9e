package core

import (
	"context"
	"strings"
	"time"
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
	// FollowUp is what the gateway's store read with the session for the
	// interceptors (FollowUpSessions); nil when it was not read.
	FollowUp *FollowUp
	// Behind is set when the command is answered aside (Command.Aside):
	// the earlier messages of its conversation still waiting.
	Behind *Behind
	// Wake, set with Behind, has the waiting messages tried again once
	// the command is answered, when they wait for a cooling provider: a
	// command that changed what they wait for calls it (/model pinning
	// another model).
	Wake func()
	// Queued is when the bot took the request in: its queue item's
	// creation, on whichever replica received it (zero when unknown). A
	// replica answering what another received knows from it that the
	// platform delivered something then (/status's last update).
	Queued time.Time
}

// Behind is what an aside command was answered beside: the earlier
// messages of its conversation waiting (for a cooling provider, a
// retry's backoff), and when the first of them is tried next.
type Behind struct {
	Waiting int
	Next    time.Time
	// Head is the first of them, the one tried next (its queue id).
	Head int64
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
	// Aside commands do not depend on the conversation's order (they
	// read, or change what is not the conversation's: /help, /status,
	// /budget). While the messages before one only wait (for a provider
	// that cools down, a retry's backoff), it is answered at once instead
	// of after them; a message being answered still goes first.
	Aside bool
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

// StatusReporter is an optional Agent capability: lines about a
// session's orchestration state (recent tools, the model and profile of
// the latest answer, the active step) for /status.
type StatusReporter interface {
	SessionStatus(ctx context.Context, s Session) []string
}

// ContextReporter is an optional Agent capability: how full a session's
// context window is ("context about 5,210 of 128,000 tokens, 4% full"),
// shown by /status on its Session line; "" when not known.
type ContextReporter interface {
	ContextUse(ctx context.Context, s Session) string
}

// ModelReporter is an optional Agent capability: which model would answer
// the session's next message, and why.
type ModelReporter interface {
	CurrentModel(ctx context.Context, s Session) (model, reason string)
}
