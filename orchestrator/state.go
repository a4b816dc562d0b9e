package orchestrator

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Store is what the orchestrator keeps beyond the history; store.DB
// implements it (asserted in cmd/opentalon/stores.go).
type Store interface {
	History
	// SetSessionState stores a session's orchestration state.
	SetSessionState(ctx context.Context, sessionID int64, st core.SessionState) error
	// AddSessionUsage adds tokens spent outside a reply to the session.
	AddSessionUsage(ctx context.Context, sessionID int64, u core.Usage) error
	// CompactHistory replaces all but the newest keep messages with a
	// summary at the head of the history; it returns how many it replaced.
	CompactHistory(ctx context.Context, sessionID int64, keep int, summary string) (int, error)
	// SaveMemory, SaveWorkflow, Memories, DeleteMemory and DeleteMemories
	// keep long-term memory (store/memories.go).
	SaveMemory(ctx context.Context, m core.Memory) (int64, error)
	SaveWorkflow(ctx context.Context, w core.Memory) (int64, error)
	Memories(ctx context.Context, q core.MemoryQuery) ([]core.Memory, error)
	// HasMemories reports whether owner has any memory, or any is shared.
	HasMemories(ctx context.Context, owner string) (bool, error)
	DeleteMemory(ctx context.Context, id int64, owner string, admin bool) (bool, error)
	DeleteMemories(ctx context.Context, owner string) (int, error)
}

// Owner is the key memories of the message's author are kept under:
// "<channel>:<user id>" ("" when the message has no user). A message a
// plugin injected has none: its user id is whatever the plugin chose, so
// it could otherwise read, fill or forget a real user's memories.
func Owner(in core.Inbound) string {
	if in.UserID == "" || in.Conversation.Channel == "" || strings.HasPrefix(in.Origin, core.OriginPlugin) {
		return ""
	}
	return in.Conversation.Channel + ":" + in.UserID
}

// isAdmin says whether the owner of memories may save and forget the
// ones shared with every user: an admin of the channel (channelAdmin,
// from channels.<x>.admins or an auth provider), or one of
// state.memory.admins.
func (o *Orchestrator) isAdmin(owner string, channelAdmin bool) bool {
	return owner != "" && (channelAdmin || slices.Contains(o.o.Memory.Admins, owner))
}

// saveState stores the turn's session state when it changed.
func (o *Orchestrator) saveState(ctx context.Context, tn *turn) {
	if o.o.Store == nil || reflect.DeepEqual(tn.st, tn.t.Session.State) {
		return
	}
	if err := o.o.Store.SetSessionState(context.WithoutCancel(ctx), tn.t.Session.ID, tn.st); err != nil {
		o.log.Error("save session state", "session", tn.t.Session.ID, "err", err)
	}
}

// SessionStatus implements core.StatusReporter: the model and profile of
// the latest answer, the recently used tools, the active step and the
// compactions.
func (o *Orchestrator) SessionStatus(_ context.Context, s core.Session) []string {
	st := s.State
	var out []string
	if st.ActiveModel != "" {
		l := "Last answer: " + st.ActiveModel
		if st.ActiveProfile != "" {
			l += " (auth profile " + st.ActiveProfile + ")"
		}
		out = append(out, l)
	}
	if len(st.RecentTools) > 0 {
		out = append(out, "Recent tools: "+strings.Join(st.RecentTools, ", "))
	}
	if l := o.stepStatus(st); l != "" {
		out = append(out, l)
	}
	if st.Compactions > 0 {
		out = append(out, fmt.Sprintf("Compacted: %d× (older turns summarized)", st.Compactions))
	}
	return out
}

// ContextUse implements core.ContextReporter: how much of the context
// window of the session's model (its /model pin, else the latest
// answer's) the history fills, as the next answer would estimate it; ""
// when the window or the history is not known.
func (o *Orchestrator) ContextUse(ctx context.Context, s core.Session) string {
	ref := s.ModelPin
	if ref == "" {
		ref = s.State.ActiveModel
	}
	if ref == "" || o.o.History == nil {
		return ""
	}
	window := o.o.LLM.ContextWindow(ref)
	if window <= 0 {
		return ""
	}
	hist, err := o.o.History.History(ctx, s.ID, o.o.MaxHistory)
	if err != nil {
		o.log.Warn("status: read the history", "session", s.ID, "err", err)
		return ""
	}
	used := len(o.prompt)/4 + 8 + estimateAll(hist)
	return fmt.Sprintf("context about %s of %s tokens, %d%% full", thousands(used), thousands(window), 100*used/window)
}

// thousands writes n with commas between thousands (128,000).
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
