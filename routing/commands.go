package routing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// Pinner stores a session's /model choices; store.DB implements it.
type Pinner interface {
	SetPins(ctx context.Context, sessionID int64, modelPin, profilePin string) error
}

// stateSaver is a Pinner that also saves a session's state (the store).
type stateSaver interface {
	SetSessionState(ctx context.Context, sessionID int64, st core.SessionState) error
}

// ExplicitChoiceWeight is the weight of the positive signal a user's
// /model choice records for that model on the current task type.
const ExplicitChoiceWeight = 3

// Commands returns /model, /models, /retry, /budget and /allowed for
// Gateway.AddCommand (replacing core's read-only /model). /retry is
// answered by the Escalator; its entry here lists it in /help and answers
// when there is nothing to retry. /budget and /allowed show to anyone and
// change for admins only (admincmds.go).
func (r *Router) Commands(p Pinner, conv Conversations) []core.Command {
	return append([]core.Command{
		{CommandInfo: core.CommandInfo{Name: "model", Usage: "/model [name|alias|auto|@profile]", Description: "Show, pin or unpin the model of this conversation"},
			Run: func(ctx context.Context, req core.CommandRequest) (string, error) {
				return r.cmdModel(ctx, req, p, conv)
			}, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "models", Usage: "/models", Description: "List the models with aliases, weights, prices and health"},
			Run: r.cmdModels, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "retry", Usage: "/retry", Description: "Answer the last question again with the next model"},
			Run: func(context.Context, core.CommandRequest) (string, error) {
				return "There is no answer to retry yet in this conversation.", nil
			}},
	}, r.adminCommands()...)
}

func (r *Router) cmdModel(ctx context.Context, req core.CommandRequest, p Pinner, conv Conversations) (string, error) {
	s := req.Session
	arg := strings.TrimSpace(req.Args)
	switch {
	case arg == "":
		model, reason := r.CurrentModel(ctx, s)
		out := fmt.Sprintf("Model: %s (%s)", model, reason)
		// Why the learned choice is what it is, for the task type of the
		// conversation's last answer.
		task := TaskChat
		if last, err := conv.LastAnswer(ctx, s.ID); err == nil && last != nil && last.TaskType != "" {
			task = last.TaskType
		}
		if !r.o.NoAffinity {
			out += "\n" + r.Explain(ctx, task).String()
		}
		switch {
		case s.ProfilePin != "":
			out += "\nAuth profile: " + s.ProfilePin + " (pinned)"
		case r.keeps(model, s.State.ActiveProfile):
			out += "\nAuth profile: " + s.State.ActiveProfile + " (kept for this conversation until it cools down, /new or /model auto)"
		default:
			out += "\nAuth profile: automatic rotation"
		}
		return out + "\nUsage: /model <name|alias> to pin, /model auto to unpin, /model @<profile> to pin a credential, /models to list.", nil
	case strings.EqualFold(arg, "auto"):
		if err := p.SetPins(ctx, s.ID, "", ""); err != nil {
			return "", err
		}
		s.ModelPin, s.ProfilePin = "", ""
		// Nor is the credential of the last answer kept: the next one is
		// chosen by rotation again (and then kept).
		if ss, ok := p.(stateSaver); ok && s.State.ActiveProfile != "" {
			st := s.State
			st.ActiveProfile = ""
			if err := ss.SetSessionState(ctx, s.ID, st); err != nil {
				return "", err
			}
			s.State = st
		}
		model, reason := r.CurrentModel(ctx, s)
		return fmt.Sprintf("Unpinned: I choose the model again. Next: %s (%s).", model, reason), nil
	case strings.HasPrefix(arg, "@"):
		id := strings.TrimPrefix(arg, "@")
		var all []string
		for prov := range r.o.Profiles {
			for _, pr := range r.o.Profiles[prov] {
				all = append(all, pr.ID)
				if pr.ID == id {
					if err := p.SetPins(ctx, s.ID, s.ModelPin, id); err != nil {
						return "", err
					}
					wake(req)
					return fmt.Sprintf("Pinned auth profile %s for calls to %s in this conversation (it is still skipped while cooling down). /model auto unpins.", id, prov), nil
				}
			}
		}
		slices.Sort(all)
		if len(all) == 0 {
			return "No auth profiles are configured (auth.profiles_file or models.providers.<id>.api_key), so there is nothing to pin.", nil
		}
		return fmt.Sprintf("Unknown auth profile %q. Profiles: %s.", id, strings.Join(all, ", ")), nil
	}
	m, ok := r.cat.resolve(arg)
	if !ok {
		return fmt.Sprintf("Unknown model %q%s. Send /models for the list.", arg, suggest(r.cat.closeMatches(arg))), nil
	}
	r.load(ctx) // the allowlist an admin set in chat
	if allowed := r.limits().allowed; !r.allows(allowed, m.Ref) {
		return fmt.Sprintf("%s is not allowed here (routing.allowed; /allowed lists them): choose one of %s.", m.Ref, strings.Join(allowed, ", ")), nil
	}
	if err := p.SetPins(ctx, s.ID, m.Ref, s.ProfilePin); err != nil {
		return "", err
	}
	wake(req)
	task := TaskChat
	var replyID int64
	if last, err := conv.LastAnswer(ctx, s.ID); err == nil && last != nil && last.TaskType != "" {
		task, replyID = last.TaskType, last.ID
	}
	if err := r.RecordSignal(ctx, core.Signal{Kind: core.SignalExplicit, Polarity: core.Positive, ReplyID: replyID, Model: m.Ref, TaskType: task,
		UserID: req.In.UserID, Weight: ExplicitChoiceWeight, At: r.now(), RequestID: req.RequestID}); err != nil {
		r.log.Error("record explicit model choice", "err", err)
	}
	return fmt.Sprintf("Pinned %s for this conversation: it answers every message until /model auto. If it fails I will tell you instead of switching.", m.Ref), nil
}

// wake has the messages waiting before an aside /model tried again with
// the pin it set (core.CommandRequest.Wake).
func wake(req core.CommandRequest) {
	if req.Wake != nil {
		req.Wake()
	}
}

func (r *Router) cmdModels(ctx context.Context, req core.CommandRequest) (string, error) {
	current, _ := r.CurrentModel(ctx, req.Session)
	now := r.now()
	var b strings.Builder
	b.WriteString("Models (highest weight is tried first):")
	for _, m := range r.cat.byWeight {
		mark := "  "
		if m.Ref == current {
			mark = "▶ "
		}
		fmt.Fprintf(&b, "\n%s%s", mark, m.Ref)
		if m.Alias != "" {
			fmt.Fprintf(&b, " (%s)", m.Alias)
		}
		fmt.Fprintf(&b, " — weight %d, $%s/$%s per M tokens in/out", m.Weight, usd(m.CostIn), usd(m.CostOut))
		if m.ContextWindow > 0 {
			fmt.Fprintf(&b, ", %dk context", m.ContextWindow/1000)
		}
		if m.Local {
			b.WriteString(", local")
		}
		cooling, total := 0, 0
		var until time.Time
		for _, ps := range r.Profiles(m.Provider()) {
			total++
			if ps.CooldownUntil.After(now) {
				cooling++
				if until.IsZero() || ps.CooldownUntil.Before(until) {
					until = ps.CooldownUntil
				}
			}
		}
		switch {
		case cooling == total && cooling > 0:
			fmt.Fprintf(&b, " — cooling down until %s UTC", until.UTC().Format("15:04"))
		case cooling > 0:
			fmt.Fprintf(&b, " — %d of %d credentials cooling down", cooling, total)
		}
		if until, _ := r.Refused(m.Ref); !until.IsZero() {
			fmt.Fprintf(&b, " — refused a request; not chosen automatically until %s UTC", until.UTC().Format("15:04"))
		}
	}
	b.WriteString("\n/model <name> pins one for this conversation.")
	return b.String(), nil
}

// keeps says the conversation's next call to model goes to profile id,
// the one of its last answer, among several of the model's provider's.
func (r *Router) keeps(model, id string) bool {
	prov, _, _ := strings.Cut(model, "/")
	ps := r.o.Profiles[prov]
	if id == "" || len(ps) < 2 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return orderProfiles(ps, r.pstate, "", id, r.o.AuthOrder[prov], r.now())[0].ID == id
}
