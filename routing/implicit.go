package routing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// Implicit signals of quiet users, beside the explicit ones (reactions,
// /retry, reject follow-ups, /model). Their weights are documented in
// docs/routing.md ("Quality signals") and were calibrated in the route
// simulator; Options.SignalWeights overrides them for experiments.
const (
	// SignalReturned: the user left right after an answer and came back
	// later (ReturnAfter or more) with the same question. A rejection.
	SignalReturned core.SignalKind = "returned"
	// SignalThanks: the user thanked for the answer, or copied it (a
	// channel that can see copies reports it with this kind). An
	// acceptance.
	SignalThanks core.SignalKind = "thanks"
	// SignalAbandoned: nothing followed the answer for AbandonAfter (no
	// verdict, no next message in its session): the user left. See
	// AbandonedWeight.
	SignalAbandoned = core.SignalAbandoned
)

// AbandonAfter is how long nothing must follow an answer before
// Router.SweepAbandoned records that it was left.
const AbandonAfter = time.Hour

// ReturnAfter is the pause after an answer from which asking the same
// question again counts as "left and came back" (SignalReturned) rather
// than an immediate rephrase.
const ReturnAfter = 10 * time.Minute

// Default weights of the implicit signals. An explicit signal (a
// reaction, /retry, a reject follow-up) weighs 1.
const (
	// MovesOnWeight: the user moved on to a new message without judging
	// the answer: weak evidence of acceptance (many users move on from a
	// poor answer too).
	MovesOnWeight = 0.5
	// ReturnedWeight: leaving and asking the same question again later is
	// as clear a rejection as saying so.
	ReturnedWeight = 1.0
	// ThanksWeight: thanks or a copy is as clear an acceptance as 👍.
	ThanksWeight = 1.0
	// AbandonedWeight: leaving without a verdict is recorded but not
	// learned from. In the simulator's user models an answer is left
	// about as often after an acceptance as after a silent rejection
	// (quiet users: 47% vs 57%; the default users: 27% vs 25%, the other
	// way round), so one abandonment carries under 1% of the information
	// of an explicit signal, and weighing it at 0.05 made the choices
	// worse (docs/routing.md, "Quiet users").
	AbandonedWeight = 0.0
)

// signalWeight is the weight a signal of kind k carries into the
// affinity, before the caller's own weight multiplies it: the documented
// default, or the override in ws.
func signalWeight(k core.SignalKind, ws map[core.SignalKind]float64) float64 {
	if w, ok := ws[k]; ok {
		return w
	}
	switch k {
	case SignalAccepted:
		return MovesOnWeight
	case SignalReturned:
		return ReturnedWeight
	case SignalThanks:
		return ThanksWeight
	case SignalAbandoned:
		return AbandonedWeight
	case SignalJudge:
		return JudgeWeight
	}
	return 1
}

// thanksWords make a short message a thank-you (English, German, French,
// Spanish, Russian); contrastWords ("but") undo it.
var (
	thanksWords   = []string{"thanks", "thank you", "thx", "ty", "cheers", "perfect", "that worked", "works now", "it works", "danke", "perfekt", "merci", "parfait", "gracias", "perfecto", "спасибо", "отлично", "👍", "🙏"}
	contrastWords = []string{"but", "aber", "mais", "pero", "но", "however", "still"}
)

// IsThanks reports whether a follow-up thanks for the previous answer: a
// short message (at most eight words) with a thank-you word and no
// "but" and no rejection.
func IsThanks(text string) bool {
	t := normalize(text)
	if t == "" || strings.HasPrefix(strings.TrimSpace(text), "/") {
		return false
	}
	words := strings.FieldsFunc(t, func(r rune) bool { return r == ' ' || r == ',' || r == '!' || r == '.' || r == '\t' || r == '\n' })
	if len(words) > 8 {
		return false
	}
	for _, w := range words {
		for _, c := range contrastWords {
			if w == c {
				return false
			}
		}
	}
	for _, p := range normRejectPhrases {
		if i := strings.Index(t, p); i >= 0 && wordBoundary(t, i, len(p)) {
			return false
		}
	}
	for _, k := range thanksWords {
		if i := strings.Index(t, k); i >= 0 && (!isWordy(k) || wordBoundary(t, i, len(k))) {
			return true
		}
	}
	return false
}

func isWordy(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x2000 }) >= 0
}

// JudgeFollowUp classifies the user's next message after an answer:
// question is the question that answer replied to, gap the time between
// the answer and text (the time to the next message). It returns the
// signal the message gives on the answer: a reject follow-up, a return
// with the same question (after ReturnAfter) or an immediate rephrase
// (negative); thanks or moving on to something new (positive).
func JudgeFollowUp(question, text string, gap time.Duration) (core.SignalKind, core.Polarity) {
	switch {
	case IsReject(text):
		return core.SignalFollowUp, core.Negative
	case IsRephrase(question, text):
		if gap >= ReturnAfter {
			return SignalReturned, core.Negative
		}
		return core.SignalRephrase, core.Negative
	case IsThanks(text):
		return SignalThanks, core.Positive
	}
	return SignalAccepted, core.Positive
}

// unjudgedStore lists the answers nothing followed; store.DB implements
// it.
type unjudgedStore interface {
	// UnjudgedReplies returns up to limit answers created in (after,
	// before] with no signal and no later reply in their session within
	// within.
	UnjudgedReplies(ctx context.Context, after, before time.Time, within time.Duration, limit int) ([]core.Reply, error)
}

var _ unjudgedStore = (*store.DB)(nil)

// abandonLookback is how far back SweepAbandoned looks for answers left
// without a verdict; abandonBatch is how many it judges per call.
const (
	abandonLookback = 24 * time.Hour
	abandonBatch    = 500
)

// SweepAbandoned records SignalAbandoned on each answer of the last day
// that nothing followed for AbandonAfter (no verdict, no later message in
// its session) and returns how many it recorded; call it every few
// minutes. Each answer is judged once (the signal is keyed by the answer's
// request). A store that cannot list such answers sweeps nothing.
func (r *Router) SweepAbandoned(ctx context.Context) (int, error) {
	us, ok := r.o.Store.(unjudgedStore)
	if !ok {
		return 0, nil
	}
	before := r.now().Add(-AbandonAfter)
	replies, err := us.UnjudgedReplies(ctx, before.Add(-abandonLookback), before, AbandonAfter, abandonBatch)
	if err != nil {
		return 0, fmt.Errorf("sweep abandoned answers: %w", err)
	}
	n := 0
	for _, rp := range replies {
		err := r.RecordSignal(ctx, core.Signal{Kind: SignalAbandoned, Polarity: core.Negative, ReplyID: rp.ID, RequestID: rp.RequestID,
			Model: rp.Model, TaskType: rp.TaskType, Weight: 1, At: rp.CreatedAt.Add(AbandonAfter)})
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
