package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing"
	"github.com/opentalon/opentalon/routing/provider"
)

// LLM is what the orchestrator needs from routing: one routed LLM call.
type LLM interface {
	Chat(ctx context.Context, c routing.Call) (routing.Result, error)
	// ContextWindow is the model's window in tokens; 0 = unknown.
	ContextWindow(ref string) int
}

// chooser is the optional LLM capability that decides the model of a call
// before it is made (routing.Router has it), so the history is fitted to
// the window of the model that will answer.
type chooser interface {
	Choose(ctx context.Context, c routing.Call) (*routing.Choice, error)
}

// History is what the orchestrator reads of a session.
type History interface {
	// History returns the newest limit messages, oldest first, with a
	// compaction summary (a system message) at the head when there is one.
	History(ctx context.Context, sessionID int64, limit int) ([]core.ChatMessage, error)
}

// Options configure an Orchestrator.
type Options struct {
	LLM     LLM
	History History
	// Store, when set, keeps the session state, compactions, memories and
	// workflows (store.DB). Without it the orchestrator remembers nothing
	// beyond the history.
	Store Store
	// Generator makes the compaction call (routing.Router); compaction is
	// off without it.
	Generator core.Generator
	// Compaction is state.compaction.
	Compaction Compaction
	// Memory is state.memory.
	Memory Memory
	// Steps are orchestrator.steps.
	Steps []Step
	// Rules are orchestrator.rules: appended to the built-in safety rules.
	Rules []string
	// MaxSteps bounds LLM calls per turn in the tool loop (default 10).
	MaxSteps int
	// Tools, when set, offers the plugins' actions to the LLM (tools.go).
	Tools ToolRunner
	// MaxHistory bounds the history entries loaded (default 200).
	MaxHistory int
	// Media reads the images a turn shows the model (store.DB); without
	// it images reach the model as a placeholder line only.
	Media  core.MediaStore
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Compaction configures how a too long history is condensed.
type Compaction struct {
	// Model is the catalog alias or reference that writes summaries.
	Model string
	// Notify tells the user, once per session, that it happened.
	Notify bool
}

// Memory configures long-term memory.
type Memory struct {
	// Tools offers memory_save, memory_search and memory_forget.
	Tools bool
	// RecallTokens bounds the memories put in each turn's system prompt.
	RecallTokens int
	// Workflows is how many similar past workflows are recalled; 0 turns
	// workflow memory (recording and recall) off.
	Workflows int
	// Admins are the owners ("<channel>:<user id>") who may save and
	// forget shared memories.
	Admins []string
}

// Orchestrator answers turns. Safe for concurrent use.
type Orchestrator struct {
	o   Options
	log *slog.Logger
	// prompt is the system prompt's part that every answer shares
	// (promptBase of o.Rules).
	prompt string
	// sections keeps the last tools section.
	sections sectionCache
	// memTools are the memory tools' specs (builtinTools).
	memTools memoryTools
	// failedCompactions holds, by session, when its last automatic
	// compaction failed (compactPause).
	failedMu          sync.Mutex
	failedCompactions map[int64]time.Time
}

var (
	_ core.Agent           = (*Orchestrator)(nil)
	_ core.StatusReporter  = (*Orchestrator)(nil)
	_ core.ContextReporter = (*Orchestrator)(nil)
)

// New builds an Orchestrator.
func New(o Options) *Orchestrator {
	if o.MaxSteps <= 0 {
		o.MaxSteps = 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxHistory <= 0 {
		o.MaxHistory = 200
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.History == nil && o.Store != nil {
		o.History = o.Store
	}
	return &Orchestrator{o: o, log: o.Logger.With("component", "orchestrator"), prompt: promptBase(o.Rules), memTools: newMemoryTools()}
}

// CurrentModel implements core.ModelReporter when the LLM can tell.
func (o *Orchestrator) CurrentModel(ctx context.Context, s core.Session) (string, string) {
	if mr, ok := o.o.LLM.(core.ModelReporter); ok {
		return mr.CurrentModel(ctx, s)
	}
	return "unknown", "no router"
}

// historyMemories is the optional Store capability that reads the
// history and whether the user has memories in one round trip; store.DB
// has it.
type historyMemories interface {
	HistoryAndMemories(ctx context.Context, sessionID int64, limit int, owner string) ([]core.ChatMessage, bool, error)
}

// history reads the turn's session history and, when the store can in
// the same round trip, whether its user has memories (turn.hasMem).
func (o *Orchestrator) history(ctx context.Context, tn *turn) ([]core.ChatMessage, error) {
	if hm, ok := o.o.History.(historyMemories); ok && tn.owner != "" && o.o.Store != nil && sameStore(o.o.Store, o.o.History) {
		msgs, has, err := hm.HistoryAndMemories(ctx, tn.t.Session.ID, o.o.MaxHistory, tn.owner)
		if err != nil {
			return nil, err
		}
		tn.hasMem = &has
		return msgs, nil
	}
	return o.o.History.History(ctx, tn.t.Session.ID, o.o.MaxHistory)
}

// sameStore says whether a and b are the same store (false when they
// cannot be compared).
func sameStore(a, b any) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// turn is the state of one Answer as the loop goes.
type turn struct {
	t     core.Turn
	owner string
	admin bool
	// hasMem says whether the user has memories when the history's read
	// said so (nil: not read yet).
	hasMem *bool
	st     core.SessionState
	// ran lists the tool calls run, in order, with whether they succeeded.
	ran []ranCall
	// files are the files the tools made, sent with the answer.
	files []core.Attachment
	// succeeded holds the result of each call that succeeded in this
	// answer, by callKey: an identical call is not run again.
	succeeded map[string]core.ToolResult
}

type ranCall struct {
	call core.ToolCall
	ok   bool
}

// Answer implements core.Agent.
func (o *Orchestrator) Answer(ctx context.Context, t core.Turn) (core.Answer, error) {
	tn := &turn{t: t, owner: Owner(t.In), st: cloneState(t.Session.State)}
	stored, err := o.history(ctx, tn)
	if err != nil {
		return core.Answer{}, err
	}
	tn.admin = o.isAdmin(tn.owner, t.Admin)
	if !t.Retry {
		o.activateStep(&tn.st, t.Text)
	}
	defer o.saveState(ctx, tn)

	hist, added := withTurn(stored, t)
	call := routing.Call{
		Purpose:      "chat",
		Session:      &t.Session,
		Conversation: t.In.Conversation,
		UserID:       t.In.UserID,
		Model:        t.Model,
		Exclude:      t.Exclude,
		Req:          provider.Request{Messages: hist},
	}
	if hasImages(hist) {
		call.Needs = []string{routing.CapVision}
	}
	if t.Stream != nil {
		call.OnText = t.Stream.Delta
	}
	window, task, err := o.choose(ctx, &call, t)
	if err != nil {
		return core.Answer{}, err
	}
	offered := o.offered(tn)
	var memories, workflows string
	if o.hasMemories(ctx, tn) {
		memories, workflows = o.recallMemories(ctx, tn), o.recallWorkflows(ctx, tn, task, offered)
	}
	call.Req.System = withSections(o.prompt, o.sections.section(offered), o.stepSection(tn.st), memories, workflows, groupSection(t, hist))
	budget := window - window/4

	compacted := false
	if over(call.Req.System, hist, budget) || o.nearHistoryLimit(stored) {
		if kept, ok := o.compact(ctx, tn, stored, budget, len(call.Req.System)); ok {
			stored, compacted = kept, true
			hist, _ = withTurn(stored, t)
		}
	}
	trimmed := Trim(hist, budget, len(call.Req.System))
	// dropped: older messages were left out without a summary.
	dropped := len(trimmed) < len(hist)
	msgs := o.loadImages(ctx, trimmed)
	res, steps, gaveUp, err := o.loop(ctx, tn, call, msgs)
	// The window is the catalog's word and the tokens an estimate: when
	// the model (and every larger one routing could take) still finds the
	// prompt too long before any tool ran, the history is condensed to
	// half the prompt it refused, then a quarter, and asked again.
	for try := 0; try < 2 && len(steps) == 0 && core.ErrorKind(err) == core.KindContextTooLong; try++ {
		small := (len(call.Req.System)/4 + 8 + estimateAll(msgs)) / 2
		o.log.Info("the model found the prompt too long; condensing the history", "session", t.Session.ID, "budget", small, "err", err)
		if kept, ok := o.compact(ctx, tn, stored, small, len(call.Req.System)); ok {
			stored, compacted = kept, true
			hist, _ = withTurn(stored, t)
		}
		trimmed = Trim(hist, small, len(call.Req.System))
		fewer := o.loadImages(ctx, trimmed)
		if estimateAll(fewer) >= estimateAll(msgs) {
			break // nothing left to condense: the turn itself is too long
		}
		msgs, dropped = fewer, dropped || len(trimmed) < len(hist)
		res, steps, gaveUp, err = o.loop(ctx, tn, call, msgs)
	}
	if len(steps) == 0 && core.ErrorKind(err) == core.KindContextTooLong {
		if _, rest := splitSummary(msgs); len(rest) == 1 && rest[0].Role == core.RoleUser {
			return core.Answer{}, messageTooLong(rest[0], err)
		}
	}
	if len(steps) > 0 && core.ErrorKind(err) == core.KindContextTooLong {
		return core.Answer{}, toolResultsTooLong(steps, err)
	}
	if err != nil {
		return core.Answer{}, err
	}
	if res.Response == nil || showsNothing(res.Text) {
		return core.Answer{}, emptyAnswer(res)
	}
	tn.st.ActiveModel, tn.st.ActiveProfile = res.Model, res.Profile
	if !gaveUp {
		o.recordWorkflow(ctx, tn, res.TaskType)
	}
	ans := core.Answer{Model: res.Model, TaskType: res.TaskType, Reason: res.Reason, Usage: res.Usage, Text: res.Text, Files: tn.files}
	added = append(added, steps...)
	ans.Messages = append(added, core.ChatMessage{Role: core.RoleAssistant, Content: res.Text})
	// An answer the provider stopped before its end is shown as far as it
	// goes, with a note saying so (the stored history keeps only the
	// model's words).
	if note := o.cutNote(res); note != "" {
		ans.Text += "\n\n" + note
	}
	// The user is told at the session's first compaction, which may take
	// two (for the window, then after the model refused the prompt).
	if compacted && o.o.Compaction.Notify && t.Session.State.Compactions == 0 {
		ans.Text += "\n\n" + compactionNote
	}
	// Older messages left out without a summary (the compaction failed or
	// is not available) are told once a session, as a compaction is.
	if dropped && !compacted && o.o.Compaction.Notify && !t.Session.State.TrimNoted {
		ans.Text += "\n\n" + trimNote
		tn.st.TrimNoted = true
	}
	// The first answer of a session started because the conversation
	// was idle past state.session_ttl says so: the user may expect the
	// bot to know what was said before. Only a person's own message is
	// told: a schedule's firing or a plugin's message that happens to
	// start the session is nobody's question (a daily firing would carry
	// the note every day when the TTL is a day).
	if t.Session.Idle > 0 && !t.Retry && t.In.Origin == "" && len(stored) == 0 {
		ans.Text += "\n\n" + idleNote(t.Session.Idle)
	}
	return ans, nil
}

// idleNote is the note under the first answer of a conversation that
// started afresh after idle.
func idleNote(idle time.Duration) string {
	return "_(Nothing had been said here for " + core.HumanDuration(idle) + ", so this is a new conversation: I no longer see the earlier messages.)_"
}

// messageTooLong is the error of a turn whose message alone the model
// found too long (err): the user is told to send less, not to start a
// new conversation, which would not help.
func messageTooLong(m core.ChatMessage, err error) error {
	size := fmt.Sprintf("about %d KB", max(1, (len(m.Content)+512)/1024))
	if len(m.Content) < 1024 {
		size = fmt.Sprintf("about %d tokens with its attachments", EstimateTokens(m))
	}
	return &core.Error{Kind: core.KindContextTooLong,
		Msg: fmt.Sprintf("your message (%s) is too long for the model to read at once. Send a shorter part of it, only what matters for your question.", size),
		Err: fmt.Errorf("%w (%d bytes, about %d tokens): %w", core.ErrMessageTooLong, len(m.Content), EstimateTokens(m), err)}
}

// toolResultsTooLong is the error of a turn the model found too long
// (err) once tools had run (steps): the history was fitted to the window
// before the first call, so their results are what overflowed it.
func toolResultsTooLong(steps []core.ChatMessage, err error) error {
	n := 0
	for _, m := range steps {
		if m.Role == core.RoleTool {
			n += len(m.Content)
		}
	}
	return &core.Error{Kind: core.KindContextTooLong,
		Msg: fmt.Sprintf("the tools' results (about %d KB) were too long for the model to read with this conversation. Ask for less at a time, or send /new to start from an empty conversation.", max(1, (n+512)/1024)),
		Err: fmt.Errorf("%w (%d bytes in %d messages): %w", core.ErrToolResultsTooLong, n, len(steps), err)}
}

// Notes under an answer the provider stopped before its end.
const (
	lengthNote = "_(My answer was cut off here: it reached the length limit for one answer. Ask me to continue, or for a shorter answer.)_"
	filterNote = "_(The AI provider's safety filter stopped this answer before its end.)_"
)

// stoppedByFilter says a finish reason is the provider's safety filter:
// OpenAI's "content_filter", Anthropic's "refusal".
func stoppedByFilter(reason string) bool {
	return reason == "content_filter" || reason == "refusal"
}

// cutNote is the note under an answer the provider cut (res.StopReason),
// "" when it ended on its own; the operator is told in the log.
func (o *Orchestrator) cutNote(res routing.Result) string {
	switch r := res.StopReason; {
	case r == "length":
		o.log.Warn("the answer was cut at the model's output token limit; raise models.catalog.<ref>.max_output_tokens if answers are often cut", "model", res.Model, "output_tokens", res.Usage.OutputTokens)
		return lengthNote
	case stoppedByFilter(r):
		o.log.Warn("the provider's safety filter stopped an answer", "model", res.Model, "stop_reason", r)
		return filterNote
	}
	return ""
}

// emptyAnswer is the error of an answer that shows nothing: an empty
// answer (malformed), or one the provider stopped before any text, at the
// output token limit or by its safety filter, which the user is told as
// it is (trying again the same way would not help).
func emptyAnswer(res routing.Result) error {
	var reason string
	if res.Response != nil {
		reason = res.StopReason
	}
	switch {
	case reason == "length":
		return tooLong(res.Model, "before writing any text")
	case stoppedByFilter(reason):
		return &core.Error{Kind: core.KindBadRequest,
			Msg: "the AI provider's safety filter withheld the answer. Try rephrasing your request; if it happens again, /new starts a fresh conversation.",
			Err: fmt.Errorf("model %s: the provider's safety filter withheld the answer (stop reason %q)", res.Model, reason)}
	}
	return core.Errorf(core.KindMalformed, "model %s: %w", res.Model, core.ErrEmptyAnswer)
}

// tooLong is the error of an answer that stopped at the model's output
// token limit before it was of any use (what stopped: before any text,
// in a tool call).
func tooLong(model, what string) error {
	return &core.Error{Kind: core.KindBadRequest,
		Msg: "the answer did not fit the length limit for one answer. Ask for a shorter answer, or tell the operator.",
		Err: fmt.Errorf("model %s stopped at its output token limit %s; raise models.catalog.%s.max_output_tokens", model, what, model)}
}

// showsNothing reports whether an answer would show the user nothing:
// only white space and code fence lines ("```\n```" is an empty code
// block, which every channel drops). Such an answer is an empty answer,
// and gets the same apology instead of a channel's "(empty answer)". A
// line that ends with the backticks it starts with ("```ls -la```") is
// code, not a fence, as channels/textfmt reads it.
func showsNothing(text string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		rest := strings.TrimLeft(t, "`")
		ticks := t[:len(t)-len(rest)]
		fence := strings.HasPrefix(t, "~~~") || len(ticks) >= 3 && (rest == "" || !strings.HasSuffix(rest, ticks))
		if t != "" && !fence {
			return false
		}
	}
	return true
}

// withTurn is the history the LLM answers from: stored plus the user's
// message, or for a retry stored up to the question being answered
// again; in a group, earlier user turns carry their sender's name
// (attributed). added is what the turn adds to the stored history so
// far: the user's message as written, its sender's name beside it.
func withTurn(stored []core.ChatMessage, t core.Turn) (hist, added []core.ChatMessage) {
	hist = append([]core.ChatMessage(nil), stored...)
	if t.Retry {
		// Re-answer the last question: drop what answered it before.
		return attributed(t, dropAfterLastUser(hist)), nil
	}
	user := core.ChatMessage{Role: core.RoleUser, Content: t.Text, Attachments: refs(t.Attachments), Name: speakerOf(t)}
	return attributed(t, append(hist, user)), []core.ChatMessage{user}
}

// choose decides the model of the turn's first call when the LLM can, so
// the history is fitted to that model's window, and returns the window
// (default 128k when unknown) and the task type ("" when not known yet).
func (o *Orchestrator) choose(ctx context.Context, call *routing.Call, t core.Turn) (window int, task string, err error) {
	if ch, ok := o.o.LLM.(chooser); ok {
		c, err := ch.Choose(ctx, *call)
		if err != nil {
			return 0, "", err
		}
		call.Choice = c
		window, task = c.Model.ContextWindow, c.TaskType
	} else {
		ref := t.Model
		if ref == "" {
			ref = t.Session.ModelPin
		}
		window = o.o.LLM.ContextWindow(ref)
	}
	if window <= 0 {
		window = 128_000
	}
	return window, task, nil
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
	n := len(m.Content)/4 + 4 + len(m.Attachments)*imageTokens
	for _, c := range m.ToolCalls {
		n += (len(c.Plugin) + len(c.Action) + 16) / 4
		for k, v := range c.Args {
			n += (len(k) + len(v)) / 4
		}
	}
	return n
}

// imageTokens is what one image is counted as in the token estimate (a
// typical tile count of the vision APIs).
const imageTokens = 800

func estimateAll(h []core.ChatMessage) int {
	n := 0
	for _, m := range h {
		n += EstimateTokens(m)
	}
	return n
}

// nearHistoryLimit says whether stored (the history as loaded) is within
// an eighth of MaxHistory of the messages loaded: past it the oldest
// messages would no longer be loaded, left out without a summary however
// few tokens they are, so the history is compacted first.
func (o *Orchestrator) nearHistoryLimit(stored []core.ChatMessage) bool {
	_, rest := splitSummary(stored)
	return len(rest) >= o.o.MaxHistory-o.o.MaxHistory/8
}

// over says whether the system prompt and history exceed budget tokens.
func over(system string, h []core.ChatMessage, budget int) bool {
	return len(system)/4+8+estimateAll(h) > budget
}

// Trim keeps the newest messages that fit budget tokens (systemBytes of
// system prompt included). A compaction summary at the head (a system
// message) is always kept. It never starts the rest of the kept history
// with a tool result or an assistant message, so tool calls keep their
// results and the conversation opens with a user message; the newest
// message is always kept.
func Trim(h []core.ChatMessage, budget, systemBytes int) []core.ChatMessage {
	var head []core.ChatMessage
	if len(h) > 1 && h[0].Role == core.RoleSystem {
		head, h = h[:1], h[1:]
	}
	used := systemBytes/4 + 8 + estimateAll(head)
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
	if start == 0 && head == nil {
		return h
	}
	return append(append([]core.ChatMessage(nil), head...), h[start:]...)
}
