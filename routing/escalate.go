package routing

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Conversations is what the escalator reads and keeps about a session;
// store.DB implements it.
type Conversations interface {
	// LastAnswer returns the newest reply of a session written by a model
	// (nil if none); replies to commands do not count.
	LastAnswer(ctx context.Context, sessionID int64) (*core.Reply, error)
	// History returns the newest limit messages, oldest first.
	History(ctx context.Context, sessionID int64, limit int) ([]core.ChatMessage, error)
	// Escalation and SaveEscalation keep the session's escalation state
	// (one row per session: bounded, and kept across restarts).
	Escalation(ctx context.Context, sessionID int64) (core.EscalationState, error)
	SaveEscalation(ctx context.Context, sessionID int64, st core.EscalationState) error
	// SignalsForReply returns the signals recorded on a reply.
	SignalsForReply(ctx context.Context, replyID int64) ([]core.Signal, error)
}

// failedReader is the optional Conversations capability that finds the
// conversation's newest message given up since a time (store.DB): what
// /retry answers after an apology.
type failedReader interface {
	LastFailedMessage(ctx context.Context, conv core.ConversationKey, after time.Time) (core.Inbound, bool, error)
}

// senderReader is the optional Conversations capability that says who
// sent a request (store.DB): in a group, only the sender of the question
// an answer answers may have it answered again.
type senderReader interface {
	RequestSender(ctx context.Context, requestID int64) (core.Inbound, bool, error)
}

// askedByAnother says whether asked is a group's message (a platform's,
// not a private chat's) sent by someone other than userID: its answer is
// theirs, and /retry or a 👎 from another member does not replace it.
// Private chats, schedule firings and plugin messages are never someone
// else's.
func askedByAnother(asked core.Inbound, userID string) bool {
	return !asked.Private && asked.Origin == "" && asked.UserID != "" && asked.UserID != userID
}

// askerOf is the sender of the request that last answers (ok false when
// the store cannot say).
func (e *Escalator) askerOf(ctx context.Context, last *core.Reply) (core.Inbound, bool, error) {
	sr, ok := e.conv.(senderReader)
	if !ok || last == nil || last.RequestID == 0 {
		return core.Inbound{}, false, nil
	}
	in, ok, err := sr.RequestSender(ctx, last.RequestID)
	if err != nil {
		return in, false, fmt.Errorf("escalation: %w", err)
	}
	return in, ok, nil
}

// onlyAskerMayRetry is the answer to a /retry of another member's
// answer in a group.
func onlyAskerMayRetry(asker core.Inbound) string {
	who := "the person who asked"
	if name := core.SpeakerName(asker.UserName); name != "" {
		who = name
	}
	return "Only " + who + " can retry this answer: it answers their message. Ask your own question, or reply to it, to get an answer of your own."
}

// followUpReader is the optional Conversations capability that reads
// what judging a message needs (the last answer, its question, the
// escalation state, whether the answer was judged) in one round trip;
// store.DB has it.
type followUpReader interface {
	FollowUp(ctx context.Context, sessionID int64) (core.FollowUp, error)
}

// followUp reads what judging a message of the session needs, in one
// round trip when the store can.
func (e *Escalator) followUp(ctx context.Context, sid int64) (core.FollowUp, error) {
	if fr, ok := e.conv.(followUpReader); ok {
		f, err := fr.FollowUp(ctx, sid)
		if err != nil {
			return f, fmt.Errorf("escalation: %w", err)
		}
		return f, nil
	}
	var f core.FollowUp
	var err error
	if f.Last, err = e.conv.LastAnswer(ctx, sid); err != nil {
		return f, fmt.Errorf("escalation: last reply: %w", err)
	}
	if f.Last == nil || f.Last.Model == "" {
		return f, nil
	}
	if asker, ok, err := e.askerOf(ctx, f.Last); err != nil {
		return f, err
	} else if ok {
		f.Asker = &asker
	}
	if f.Question, err = e.lastQuestion(ctx, sid); err != nil {
		return f, err
	}
	if f.Escalation, err = e.conv.Escalation(ctx, sid); err != nil {
		return f, fmt.Errorf("escalation: %w", err)
	}
	prior, err := e.conv.SignalsForReply(ctx, f.Last.ID)
	if err != nil {
		return f, fmt.Errorf("escalation: the signals of reply %d: %w", f.Last.ID, err)
	}
	for _, p := range prior {
		// Only a verdict blocks another: /model choices, positive
		// reactions and an abandonment noticed while the user was away
		// do not.
		if p.Kind != core.SignalExplicit && p.Kind != SignalAbandoned && (p.Kind != core.SignalReaction || p.Polarity == core.Negative) {
			f.Judged = true
		}
	}
	return f, nil
}

// Escalator is the core.Interceptor that watches each message for a
// verdict on the previous answer. A rejection (/retry or a follow-up such
// as "no, try again") records a negative signal and asks the gateway to
// answer the previous question again with the next model by weight, at
// most MaxEscalations times per question. A rephrase records a negative
// signal and lets the message be answered normally, and so does the same
// question asked again after a while (the user came back); thanks, or any
// other message, record an implicit acceptance of the previous answer
// (JudgeFollowUp; the router weighs each kind). It decides only:
// the gateway runs the re-answer through the hooks and the agent. Its
// state lives in the store: the models that answered the question being
// escalated (written only while a chain exists), and the verdicts, which
// are the signals recorded on a reply — so a restart or a retried message
// neither forgets a chain nor counts a verdict twice.
type Escalator struct {
	r    *Router
	conv Conversations
	log  *slog.Logger
}

var _ core.Interceptor = (*Escalator)(nil)

// NewEscalator builds the interceptor; register it with
// Gateway.AddInterceptor.
func NewEscalator(r *Router, conv Conversations, log *slog.Logger) *Escalator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Escalator{r: r, conv: conv, log: log.With("component", "escalation")}
}

// Intercept implements core.Interceptor.
func (e *Escalator) Intercept(ctx context.Context, req core.CommandRequest) (core.Decision, error) {
	text := req.In.Text
	name, _, isCmd := core.ParseCommand(text)
	retry := isCmd && name == "retry"
	if isCmd && !retry {
		return core.Decision{}, nil
	}
	sid := req.Session.ID
	var f core.FollowUp
	if req.FollowUp != nil {
		f = *req.FollowUp // read with the session
	} else {
		var err error
		if f, err = e.followUp(ctx, sid); err != nil {
			return core.Decision{}, err
		}
	}
	last, question, st := f.Last, f.Question, f.Escalation
	if retry {
		// After an apology, /retry is the failed message tried again: not a
		// verdict on the answer before it.
		if d, ok, err := e.retryFailed(ctx, req, last); ok || err != nil {
			return d, err
		}
	}
	if last == nil || last.Model == "" {
		if retry {
			return core.Decision{Reply: "There is no answer to retry yet in this conversation."}, nil
		}
		return core.Decision{}, nil
	}
	if !req.In.Private && f.Asker != nil && askedByAnother(*f.Asker, req.In.UserID) {
		// In a group the answer belongs to whoever asked: another
		// member's /retry neither replaces it nor judges it, and their
		// message is no verdict on it either ("that's wrong" or thanks
		// may be about anything said since): it is answered as a new
		// message, and a new question ends the escalation chain.
		if retry {
			return core.Decision{Reply: onlyAskerMayRetry(*f.Asker)}, nil
		}
		if st.Question == "" && len(st.Models) == 0 {
			return core.Decision{}, nil
		}
		return core.Decision{}, e.conv.SaveEscalation(ctx, sid, core.EscalationState{})
	}
	sig := core.Signal{ReplyID: last.ID, Model: last.Model, TaskType: last.TaskType, UserID: req.In.UserID, Weight: 1, At: req.In.ReceivedAt, RequestID: req.RequestID}
	var d core.Decision
	if retry {
		sig.Kind, sig.Polarity = core.SignalRetry, core.Negative
	} else {
		// The follow-up judges the answer: a rejection, the same question
		// again (at once: a rephrase; after a while: the user came back),
		// thanks, or moving on (implicit signals, weighted by the router).
		sig.Kind, sig.Polarity = JudgeFollowUp(core.OwnWords(question), text, req.In.ReceivedAt.Sub(last.CreatedAt))
	}
	switch {
	case sig.Kind == core.SignalRetry, sig.Kind == core.SignalFollowUp:
	case sig.Polarity == core.Negative && sig.Kind != SignalAbandoned:
		// Asked again: answered as a new message, the earlier answer judged.
		e.judge(ctx, sig, f.Judged)
		return d, nil
	default:
		e.judge(ctx, sig, f.Judged)
		if st.Question == "" && len(st.Models) == 0 {
			return d, nil
		}
		// A new question ends the escalation chain.
		return d, e.conv.SaveEscalation(ctx, sid, core.EscalationState{})
	}
	e.judge(ctx, sig, f.Judged)
	if e.r.o.NoEscalation && !retry {
		// No other model re-answers: the rejection is the message.
		return core.Decision{}, nil
	}
	correction := ""
	if sig.Kind == core.SignalFollowUp && IsCorrection(text) {
		correction = text
	}
	if question == "" {
		d = core.Decision{Reply: "I cannot find the question to answer again; please ask it once more."}
	} else {
		d = e.escalate(&st, req.Session, last, question, correction)
	}
	return d, e.conv.SaveEscalation(ctx, sid, st)
}

// retryFailed decides /retry when the conversation's newest message was
// given up (its user got an apology) since the last answer: that message
// is answered again, as it was asked, and nothing is judged. ok is false
// when there is no such message.
func (e *Escalator) retryFailed(ctx context.Context, req core.CommandRequest, last *core.Reply) (core.Decision, bool, error) {
	fr, ok := e.conv.(failedReader)
	if !ok {
		return core.Decision{}, false, nil
	}
	var after time.Time
	if last != nil {
		after = last.CreatedAt
	}
	conv := req.Session.Conversation
	if conv == (core.ConversationKey{}) {
		conv = req.In.Conversation
	}
	in, ok, err := fr.LastFailedMessage(ctx, conv, after)
	if err != nil || !ok {
		return core.Decision{}, false, err
	}
	if !req.In.Private && askedByAnother(in, req.In.UserID) {
		// Another member's message: theirs to try again.
		return core.Decision{Reply: onlyAskerMayRetry(in)}, true, nil
	}
	// The files cannot be sent again: a message of files and no words of
	// the user's (a reply or a forward quoted in Context, or nothing) is
	// not retried without them.
	if strings.TrimSpace(in.Prompt()) == "" || strings.TrimSpace(in.Text) == "" && len(in.Files) > 0 {
		return core.Decision{Reply: "I could not answer your last message, and /retry cannot send its files again: please send them once more."}, true, nil
	}
	quoted := in.Text
	if strings.TrimSpace(quoted) == "" {
		quoted = in.Context // a forward without words of the user's
	}
	if r := []rune(quoted); len(r) > 60 {
		quoted = string(r[:59]) + "…"
	}
	quoted = strings.Join(strings.Fields(quoted), " ")
	return core.Decision{Turn: &core.TurnOverride{
		Text: in.Prompt(),
		Finish: func(ans *core.Answer) {
			ans.Text = fmt.Sprintf("↻ Trying again: “%s”", quoted) + "\n\n" + ans.Text
		},
	}}, true, nil
}

// InterceptReaction implements core.ReactionInterceptor: with
// routing.escalate_on_reaction on, a 👎 on the session's latest answer asks
// for its question to be answered again by the next model by weight. The
// gateway has already recorded the reaction's signal.
func (e *Escalator) InterceptReaction(ctx context.Context, re core.Reaction, judged *core.Reply, s core.Session) (core.Decision, error) {
	if !e.r.o.EscalateOnReaction {
		return core.Decision{}, nil
	}
	last, err := e.conv.LastAnswer(ctx, s.ID)
	if err != nil || last == nil || last.ID != judged.ID {
		return core.Decision{}, err
	}
	// In a group, anyone's 👎 counts as a verdict (the gateway recorded
	// it), but only the asker's has their answer replaced.
	asker, ok, err := e.askerOf(ctx, last)
	if err != nil || ok && askedByAnother(asker, re.UserID) {
		return core.Decision{}, err
	}
	question, err := e.lastQuestion(ctx, s.ID)
	if err != nil || question == "" {
		return core.Decision{}, err
	}
	st, err := e.conv.Escalation(ctx, s.ID)
	if err != nil {
		return core.Decision{}, fmt.Errorf("escalation: %w", err)
	}
	d := e.escalate(&st, s, last, question, "")
	return d, e.conv.SaveEscalation(ctx, s.ID, st)
}

var _ core.ReactionInterceptor = (*Escalator)(nil)

// judge records a verdict on a reply once: a reply already judged (by a
// follow-up, a retry, or a 👎) is not judged again, so a message after a
// failed re-answer cannot count the rejected answer as accepted. A retried
// message records nothing twice either: the store keys its signals by
// request.
func (e *Escalator) judge(ctx context.Context, s core.Signal, judged bool) {
	if judged {
		return
	}
	// An acceptance changes nothing this message does: it is stored with
	// the reply (or when the message ends without one); a rejection is
	// stored at once, before the re-answer is routed.
	if err := e.r.recordSignal(ctx, s, s.Polarity == core.Positive); err != nil {
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

// escalate decides the re-answer of question by the next model by
// weight: a turn that excludes every model that already answered it (the
// chain in st, extended by the model of the rejected answer), with a note.
// A rejection that says more (correction: "that's wrong, I asked about
// Peru") is what the turn answers, after the history, instead of the
// question again: its words are the point of it.
func (e *Escalator) escalate(st *core.EscalationState, s core.Session, last *core.Reply, question, correction string) core.Decision {
	if st.Question != question || len(st.Models) == 0 {
		st.Question, st.Models = question, nil
	}
	if len(st.Models) == 0 || st.Models[len(st.Models)-1] != last.Model {
		st.Models = append(st.Models, last.Model)
	}
	tries := len(st.Models) - 1
	pinned := s.ModelPin != ""
	if e.r.o.NoEscalation && !pinned {
		return core.Decision{Turn: &core.TurnOverride{
			Text: question, Retry: true, Model: last.Model,
			Finish: func(ans *core.Answer) {
				ans.Text = fmt.Sprintf("↻ Answered again by %s (routing.max_escalations is 0: I do not switch models).", ans.Model) + "\n\n" + ans.Text
			},
		}}
	}
	if !pinned && tries >= e.r.o.MaxEscalations {
		// The chain may come back to a model (when every other was
		// tried): name each once.
		var by []string
		for _, m := range st.Models {
			if !slices.Contains(by, m) {
				by = append(by, m)
			}
		}
		return core.Decision{Reply: fmt.Sprintf("I have already re-answered this question %d times (answers by %s); routing.max_escalations is %d. Send /models to see them and /model <name> to choose one yourself.",
			tries, strings.Join(by, ", "), e.r.o.MaxEscalations)}
	}
	text, retry := question, true
	if correction != "" {
		text, retry = correction, false
	}
	answered := slices.Clone(st.Models)
	return core.Decision{Turn: &core.TurnOverride{
		Text: text, Retry: retry, Exclude: answered,
		Finish: func(ans *core.Answer) {
			note := fmt.Sprintf("↻ Answered again by %s (%s was rejected).", ans.Model, last.Model)
			switch {
			case pinned:
				note = fmt.Sprintf("↻ Answered again by your pinned model %s (send /model auto to let me escalate to another model).", ans.Model)
			case ans.Model == last.Model:
				// No other model could answer: the catalog has one, or
				// the others are excluded or cooling down.
				note = fmt.Sprintf("↻ Answered again by %s, the only model available now (add models to models.catalog to let /retry try another).", ans.Model)
			case slices.Contains(answered, ans.Model):
				// Every model has answered the question: the router came
				// back to one whose answer was rejected before.
				note = fmt.Sprintf("↻ Answered again by %s, which answered this before: every model has answered this question once (%s was rejected). Send /model <name> to choose one yourself.", ans.Model, last.Model)
			}
			ans.Text = note + "\n\n" + ans.Text
		},
	}}
}
