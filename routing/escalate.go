package routing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/opentalon/opentalon/core"
)

// Conversations is what the escalator reads about a session; store.DB
// implements it.
type Conversations interface {
	// LastAnswer returns the newest reply of a session written by a model
	// (nil if none); replies to commands do not count.
	LastAnswer(ctx context.Context, sessionID int64) (*core.Reply, error)
	// History returns the newest limit messages, oldest first.
	History(ctx context.Context, sessionID int64, limit int) ([]core.ChatMessage, error)
}

// Escalator is the core.Interceptor that watches each message for a
// verdict on the previous answer. A rejection (/retry or a follow-up such
// as "no, try again") records a negative signal and has the next model by
// weight re-answer the previous question, at most MaxEscalations times per
// question. A rephrase records a negative signal and lets the message be
// answered normally; any other message records an implicit acceptance of
// the previous answer.
type Escalator struct {
	r     *Router
	agent core.Agent
	conv  Conversations
	log   *slog.Logger

	mu sync.Mutex
	// chains remembers, per session, the question being escalated and the
	// models that already answered it.
	chains map[int64]*escalation
	// judged remembers, per session, the reply already judged.
	judged map[int64]int64
}

type escalation struct {
	question string
	models   []string
}

var _ core.Interceptor = (*Escalator)(nil)

// NewEscalator builds the interceptor; register it with
// Gateway.AddInterceptor.
func NewEscalator(r *Router, agent core.Agent, conv Conversations, log *slog.Logger) *Escalator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Escalator{r: r, agent: agent, conv: conv, log: log.With("component", "escalation"), chains: map[int64]*escalation{}, judged: map[int64]int64{}}
}

// Intercept implements core.Interceptor.
func (e *Escalator) Intercept(ctx context.Context, req core.CommandRequest) (*core.Answer, bool, error) {
	text := req.In.Text
	name, _, isCmd := core.ParseCommand(text)
	retry := isCmd && name == "retry"
	if isCmd && !retry {
		return nil, false, nil
	}
	last, err := e.conv.LastAnswer(ctx, req.Session.ID)
	if err != nil {
		return nil, false, fmt.Errorf("escalation: last reply: %w", err)
	}
	if last == nil || last.Model == "" {
		if retry {
			return &core.Answer{Text: "There is no answer to retry yet in this conversation."}, true, nil
		}
		return nil, false, nil
	}
	question, err := e.lastQuestion(ctx, req.Session.ID)
	if err != nil {
		return nil, false, err
	}
	sig := core.Signal{ReplyID: last.ID, Model: last.Model, TaskType: last.TaskType, UserID: req.In.UserID, Weight: 1, At: req.In.ReceivedAt}
	switch {
	case retry:
		sig.Kind, sig.Polarity = core.SignalRetry, core.Negative
	case IsReject(text):
		sig.Kind, sig.Polarity = core.SignalFollowUp, core.Negative
	case IsRephrase(question, text):
		sig.Kind, sig.Polarity = core.SignalRephrase, core.Negative
		e.judge(ctx, req.Session.ID, sig)
		return nil, false, nil
	default:
		sig.Kind, sig.Polarity = SignalAccepted, core.Positive
		e.judge(ctx, req.Session.ID, sig)
		e.mu.Lock()
		delete(e.chains, req.Session.ID) // a new question ends the escalation chain
		e.mu.Unlock()
		return nil, false, nil
	}
	e.judge(ctx, req.Session.ID, sig)
	if question == "" {
		return &core.Answer{Text: "I cannot find the question to answer again; please ask it once more."}, true, nil
	}
	return e.escalate(ctx, req, last, question)
}

// InterceptReaction implements core.ReactionInterceptor: with
// routing.escalate_on_reaction on, a 👎 on the session's latest answer has
// the next model by weight answer its question again. The gateway has
// already recorded the reaction's signal.
func (e *Escalator) InterceptReaction(ctx context.Context, re core.Reaction, judged *core.Reply, s core.Session) (*core.Answer, error) {
	if !e.r.o.EscalateOnReaction {
		return nil, nil
	}
	last, err := e.conv.LastAnswer(ctx, s.ID)
	if err != nil || last == nil || last.ID != judged.ID {
		return nil, err
	}
	question, err := e.lastQuestion(ctx, s.ID)
	if err != nil || question == "" {
		return nil, err
	}
	e.mu.Lock()
	e.judged[s.ID] = last.ID
	e.mu.Unlock()
	in := core.Inbound{Conversation: re.Conversation, MessageID: re.MessageID, UserID: re.UserID, ReceivedAt: re.At}
	ans, _, err := e.escalate(ctx, core.CommandRequest{Session: s, In: in}, last, question)
	return ans, err
}

var _ core.ReactionInterceptor = (*Escalator)(nil)

// judge records a signal once per reply: a message retried by the
// queue, or a second verdict on the same answer, does not count again.
func (e *Escalator) judge(ctx context.Context, sessionID int64, s core.Signal) {
	e.mu.Lock()
	done := e.judged[sessionID] == s.ReplyID
	e.judged[sessionID] = s.ReplyID
	e.mu.Unlock()
	if done {
		return
	}
	if err := e.r.RecordSignal(ctx, s); err != nil {
		e.log.Error("record signal", "kind", s.Kind, "err", err)
	}
}

func (e *Escalator) lastQuestion(ctx context.Context, sessionID int64) (string, error) {
	// It runs on every message: read the last few entries first (the
	// question is usually right before the answer) and the last 50 only
	// when tool calls fill the tail.
	for _, n := range []int{4, 50} {
		hist, err := e.conv.History(ctx, sessionID, n)
		if err != nil {
			return "", fmt.Errorf("escalation: history: %w", err)
		}
		for i := len(hist) - 1; i >= 0; i-- {
			if hist[i].Role == core.RoleUser {
				return hist[i].Content, nil
			}
		}
		if len(hist) < n {
			break // the whole history was read
		}
	}
	return "", nil
}

// escalate re-answers question with the next model by weight.
func (e *Escalator) escalate(ctx context.Context, req core.CommandRequest, last *core.Reply, question string) (*core.Answer, bool, error) {
	sid := req.Session.ID
	e.mu.Lock()
	ch := e.chains[sid]
	if ch == nil || ch.question != question || ch.models[len(ch.models)-1] != last.Model {
		ch = &escalation{question: question, models: []string{last.Model}}
		e.chains[sid] = ch
	}
	tries := len(ch.models) - 1
	exclude := append([]string(nil), ch.models...)
	e.mu.Unlock()
	pinned := req.Session.ModelPin != ""
	if !pinned && tries >= e.r.o.MaxEscalations {
		return &core.Answer{Text: fmt.Sprintf("I have already re-answered this question with %d other models (%s); routing.max_escalations is %d. Send /models to see them and /model <name> to choose one yourself.",
			tries, strings.Join(ch.models, ", "), e.r.o.MaxEscalations)}, true, nil
	}
	ans, err := e.agent.Answer(ctx, core.Turn{RequestID: req.RequestID, Session: req.Session, In: req.In, Text: question, Retry: true, Exclude: exclude})
	if err != nil {
		return nil, true, err
	}
	e.mu.Lock()
	ch.models = append(ch.models, ans.Model)
	e.mu.Unlock()
	note := fmt.Sprintf("↻ Answered again by %s (%s was rejected).", ans.Model, last.Model)
	if pinned {
		note = fmt.Sprintf("↻ Answered again by your pinned model %s (send /model auto to let me escalate to another model).", ans.Model)
	}
	ans.Text = note + "\n\n" + ans.Text
	return &ans, true, nil
}
