package routing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

// The LLM judge (routing.judge, off by default). Quiet users leave most
// answers without a verdict; the judge is a small model that grades a
// budgeted share of the answers (the question and the answer, nothing
// else of the conversation) as GOOD or BAD, in the background after the
// answer was given. Its grade is a signal of kind "judge" on the answer's
// model and task type; its calls are in the ledger with purpose "judge"
// and count against routing.judge.daily_usd.

// Judging configures the judge (routing.judge).
type Judging struct {
	// Model is the judge's ref or alias ("" = no judge).
	Model string
	// Rate is the share of chat answers graded (default DefaultJudgeRate).
	Rate float64
	// DailyUSD caps the judge's cost per UTC day (0 = no cap).
	DailyUSD float64
}

// Judge defaults, kinds and purposes.
const (
	DefaultJudgeRate = 0.05
	// SignalJudge is the judge's grade of an answer.
	SignalJudge core.SignalKind = "judge"
	// PurposeJudge is the ledger purpose of the judge's calls.
	PurposeJudge = "judge"
	// JudgeWeight: a grade weighs like an explicit signal, less the
	// judge's own mistakes (a small model agrees with users on about
	// four answers in five).
	JudgeWeight = 0.6
	// judgeMaxTokens caps the judge's answer (one word).
	judgeMaxTokens = 8
)

// judgePrompt asks for one word.
const judgePrompt = `You grade an assistant's answer to a user's message. Reply with exactly one word: GOOD if the answer is correct, helpful and answers what was asked, BAD otherwise.`

// parseGrade reads the judge's answer: GOOD, BAD, or neither.
func parseGrade(text string) (core.Polarity, bool) {
	t := strings.ToUpper(strings.TrimSpace(text))
	t = strings.Trim(t, ".!*\"' ")
	switch {
	case strings.HasPrefix(t, "GOOD"):
		return core.Positive, true
	case strings.HasPrefix(t, "BAD"):
		return core.Negative, true
	}
	return core.Neutral, false
}

// maybeJudge sends a share of the chat answers to the judge, in the
// background: an answer with text (not a tool call) to a call of purpose
// chat, while the judge's daily budget allows. Drain waits for the
// grades in flight.
func (r *Router) maybeJudge(ctx context.Context, c Call, res Result) {
	j := r.o.Judge
	if j.Model == "" || res.Response == nil || res.Text == "" || len(res.ToolCalls) > 0 || (c.Purpose != "" && c.Purpose != "chat") {
		return
	}
	switch res.StopReason {
	case "length", "content_filter", "refusal":
		// Cut at the output token limit (a config's) or by the
		// provider's safety filter: the answer's end is not the model's
		// to be graded on.
		return
	}
	m, ok := r.cat.resolve(j.Model)
	if !ok {
		return
	}
	r.randMu.Lock()
	draw := r.rnd.Float64()
	r.randMu.Unlock()
	if draw >= j.Rate {
		return
	}
	now := r.now()
	r.mu.Lock()
	day := now.UTC().Truncate(24 * time.Hour)
	if !day.Equal(r.judgeDay) {
		r.judgeDay, r.judgeSpent = day, 0
	}
	allowed := j.DailyUSD <= 0 || r.judgeSpent < j.DailyUSD
	r.mu.Unlock()
	if !allowed {
		return
	}
	question := ""
	for i := len(c.Req.Messages) - 1; i >= 0; i-- {
		if c.Req.Messages[i].Role == core.RoleUser {
			question = c.Req.Messages[i].Content
			break
		}
	}
	if question == "" {
		return
	}
	jc := Call{Purpose: PurposeJudge, Conversation: c.Conversation, UserID: c.UserID, Session: c.Session, TaskType: res.TaskType,
		Req: provider.Request{System: judgePrompt, MaxTokens: judgeMaxTokens, Messages: []core.ChatMessage{
			{Role: core.RoleUser, Content: fmt.Sprintf("User's message:\n%s\n\nAssistant's answer:\n%s", question, res.Text)}}}}
	sig := core.Signal{Kind: SignalJudge, Model: res.Model, TaskType: res.TaskType, UserID: c.UserID, Weight: 1, At: now}
	r.judging.Add(1)
	go func() {
		defer r.judging.Done()
		// The judge outlives the item: its ledger row cannot wait for
		// the item's reply (core.Deferred), which may be stored by now.
		ctx := core.WithDeferred(context.WithoutCancel(ctx), nil)
		if r.o.DailyUSD > 0 {
			// The judge is the first thing a tight budget gives up.
			if spent, err := r.o.Store.SpentSince(ctx, day, ""); err != nil || spent >= 0.8*r.o.DailyUSD {
				return
			}
		}
		d := decision{m: m, reason: "judge (routing.judge.model)", strict: true}
		d.chain = []Model{m}
		out, err := r.run(ctx, jc, d)
		if err != nil {
			r.log.Warn("judge an answer", "judge", m.Ref, "err", err)
			return
		}
		r.mu.Lock()
		r.judgeSpent += out.Usage.CostUSD
		r.mu.Unlock()
		pol, ok := parseGrade(out.Text)
		if !ok {
			r.log.Warn("the judge answered neither GOOD nor BAD; grade ignored", "judge", m.Ref)
			return
		}
		sig.Polarity = pol
		if err := r.RecordSignal(ctx, sig); err != nil {
			r.log.Error("record the judge's grade", "err", err)
		}
	}()
}

// Drain waits until the judge's grades in flight are recorded, then
// writes the learning state changed since it was last written (see
// SaveState). Call it before closing the store.
func (r *Router) Drain(ctx context.Context) error {
	r.judging.Wait()
	return r.SaveState(ctx)
}
