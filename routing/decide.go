package routing

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// decision is the outcome of the precedence rules for one call.
type decision struct {
	m      Model
	reason string
	// strict: the user chose this model; no silent fallback.
	strict bool
	chain  []Model
	// budgetSpent: a budget is used up; only free models may answer.
	budgetSpent bool
	// explore says whether the learned choice explored.
	explore Exploration
}

// Reasons (prefixes) the router gives for its choice.
const (
	ReasonRequest  = "per-request model"
	ReasonPin      = "pinned for this conversation with /model"
	ReasonChat     = "configured for this chat"
	ReasonChannel  = "configured for this channel"
	ReasonTaskPin  = "routing.pin"
	ReasonAffinity = "learned affinity"
	ReasonPrimary  = "routing.primary"
	ReasonWeight   = "highest weight"
	ReasonEscalate = "escalation"
	ReasonBudget   = "budget"
	ReasonExplore  = "exploration"
	ReasonWindow   = "a larger context window than the chosen model's"
)

// decide applies the precedence rules: per request, per conversation,
// per chat, per channel, per task pin, escalation, learned affinity,
// primary, highest weight; then the budget. sample=false replaces the
// random draw with the posterior mean (for /status).
func (r *Router) decide(ctx context.Context, c Call, task string, sample bool) (decision, error) {
	var d decision
	excluded := map[string]bool{}
	for _, e := range c.Exclude {
		if m, ok := r.cat.resolve(e); ok {
			excluded[m.Ref] = true
		}
	}
	conv := c.Conversation
	if c.Session != nil && conv == (core.ConversationKey{}) {
		conv = c.Session.Conversation
	}
	unable, notAllowed := "", ""
	if len(c.Needs) > 0 {
		capable := 0
		for _, m := range r.cat.byWeight {
			if !m.canAll(c.Needs) {
				excluded[m.Ref] = true
			} else {
				capable++
			}
		}
		if capable == 0 {
			return d, core.Errorf(core.KindInvalid, "no model in models.catalog has the capabilities %v this message needs; add them to a model's capabilities", c.Needs)
		}
	}
	// A model that refused a request lately is not the router's choice
	// (a strict choice below still takes it).
	r.avoidRefused(excluded)
	switch {
	case c.Model != "":
		m, ok := r.cat.resolve(c.Model)
		if !ok {
			return d, core.Errorf(core.KindInvalid, "unknown model %q; use a provider/model ref or alias from models.catalog%s", c.Model, suggest(r.cat.closeMatches(c.Model)))
		}
		if !m.canAll(c.Needs) {
			unable = m.Ref
			break
		}
		d = decision{m: m, reason: ReasonRequest, strict: true}
	case c.Session != nil && c.Session.ModelPin != "":
		if m, ok := r.cat.resolve(c.Session.ModelPin); ok && !m.canAll(c.Needs) {
			unable = m.Ref
		} else if ok && !r.allows(r.limits().allowed, m.Ref) {
			// An admin took the model off the allowlist after the pin.
			notAllowed = m.Ref
		} else if ok {
			d = decision{m: m, reason: ReasonPin + " (/model auto unpins)", strict: true}
		} else {
			r.log.Warn("ignoring a conversation pin to a model no longer in the catalog", "model", c.Session.ModelPin, "conv", conv.String())
		}
	}
	if d.m.Ref == "" {
		// Only chat answers are judged by users, so only they may probe.
		probe := sample && (c.Purpose == "" || c.Purpose == "chat")
		d = r.choose(conv, task, excluded, c.Exclude, sample, probe)
		if unable != "" {
			d.reason += fmt.Sprintf(" (%s lacks %v)", unable, c.Needs)
		}
		if notAllowed != "" {
			d.reason += fmt.Sprintf(" (the /model pin %s is not allowed any more: /allowed)", notAllowed)
		}
	}
	chosen := d.m.Ref
	if err := r.applyBudget(ctx, conv, &d, excluded); err != nil {
		return d, err
	}
	if d.m.Ref != chosen {
		d.explore = NotExploring
	}
	d.chain = r.chain(d, excluded)
	return d, nil
}

// choose applies the non-strict rules.
func (r *Router) choose(conv core.ConversationKey, task string, excluded map[string]bool, exclude []string, sample, probe bool) decision {
	pick := func(ref, reason string) (decision, bool) {
		m, ok := r.cat.resolve(ref)
		if !ok || excluded[m.Ref] {
			return decision{}, false
		}
		return decision{m: m, reason: reason}, true
	}
	if len(exclude) > 0 {
		if d, ok := r.escalation(task, excluded, exclude); ok {
			return d
		}
	}
	if ref := r.o.ChatModels[conv.Channel][conv.Chat]; ref != "" {
		if d, ok := pick(ref, fmt.Sprintf("%s (channels.%s.models[%q])", ReasonChat, conv.Channel, conv.Chat)); ok {
			return d
		}
	}
	if ref := r.o.ChannelModels[conv.Channel]; ref != "" {
		if d, ok := pick(ref, fmt.Sprintf("%s (channels.%s.model)", ReasonChannel, conv.Channel)); ok {
			return d
		}
	}
	if ref := r.o.Pin[task]; ref != "" {
		if d, ok := pick(ref, fmt.Sprintf("%s.%s", ReasonTaskPin, task)); ok {
			return d
		}
	}
	if !r.o.NoAffinity {
		if d, ok := r.byAffinity(task, excluded, sample, probe); ok {
			return d
		}
	}
	if r.o.Primary != "" {
		if d, ok := pick(r.o.Primary, ReasonPrimary); ok {
			return d
		}
	}
	for _, m := range r.cat.byWeight {
		if !excluded[m.Ref] {
			return decision{m: m, reason: fmt.Sprintf("%s (%d)", ReasonWeight, m.Weight)}
		}
	}
	return decision{m: r.cat.byWeight[0], reason: fmt.Sprintf("%s (%d); every model was excluded", ReasonWeight, r.cat.byWeight[0].Weight)}
}

// minEscalationEvidence is the decayed evidence a model needs for the
// task before escalation prefers it over the next model by weight.
const minEscalationEvidence = 5

// escalation chooses the re-answer after a rejection: the model with the
// best mean utility for the task among those not yet tried that have
// some evidence for it, when that beats the next model by weight after
// the rejected one (wrapping to the highest-weight unused model), else
// that next model. Without learning (or evidence) it is the order of the
// weights.
func (r *Router) escalation(task string, excluded map[string]bool, exclude []string) (decision, bool) {
	last, _ := r.cat.resolve(exclude[len(exclude)-1])
	next, wrapped := Model{}, false
	after := false
	for _, m := range r.cat.byWeight {
		if m.Ref == last.Ref {
			after = true
			continue
		}
		if after && !excluded[m.Ref] {
			next = m
			break
		}
	}
	if next.Ref == "" {
		for _, m := range r.cat.byWeight {
			if !excluded[m.Ref] {
				next, wrapped = m, true
				break
			}
		}
	}
	if next.Ref == "" {
		return decision{}, false
	}
	if !r.o.NoAffinity {
		var cbuf [16]armView
		r.mu.Lock()
		cs, _ := r.viewTask(task, excluded, r.now(), cbuf[:0])
		r.mu.Unlock()
		b, n := -1, -1
		for i, c := range cs {
			if c.m.Ref == next.Ref {
				n = i
			}
			if c.evidence >= minEscalationEvidence && (b < 0 || c.u > cs[b].u) {
				b = i
			}
		}
		if b >= 0 && n >= 0 && b != n && cs[b].u > cs[n].u {
			return decision{m: cs[b].m, reason: fmt.Sprintf("%s: best learned for %s after %s was rejected (%.0f%% accepted)", ReasonEscalate, task, last.Ref, 100*cs[b].full.mean())}, true
		}
	}
	if wrapped {
		return decision{m: next, reason: fmt.Sprintf("%s: %s was rejected", ReasonEscalate, last.Ref)}, true
	}
	return decision{m: next, reason: fmt.Sprintf("%s: next by weight after %s", ReasonEscalate, last.Ref)}, true
}

// byAffinity is the choice rule: Thompson sampling on each model's
// acceptance posterior (its prior from the catalog weight plus its
// decayed evidence), minus λ × its price relative to the most expensive
// model; the highest utility wins. Models the stop rule rules out are
// not sampled; one of them may instead be probed (see explore.go) when
// an improvement would be worth checking and the budget allows. With no
// signals for the task yet it declines, so the primary or highest weight
// answers.
func (r *Router) byAffinity(task string, excluded map[string]bool, sample, probe bool) (decision, bool) {
	now := r.now()
	var cbuf [16]armView
	r.mu.Lock()
	cs, total := r.viewTask(task, excluded, now, cbuf[:0])
	if total < 0.5 || len(cs) == 0 {
		r.mu.Unlock()
		return decision{}, false
	}
	if sample {
		r.countChoice(task, now)
	}
	g := r.incumbentOf(task, cs, len(excluded) == 0)
	r.settle(task, cs, g, now)
	if probe && !r.probe.Off {
		if d, ok := r.probeDecision(task, cs, g, now); ok {
			r.mu.Unlock()
			return d, true
		}
	}
	r.mu.Unlock()
	best := g
	if sample {
		best = r.sampleArm(cs, g)
	}
	c := cs[best]
	d := decision{m: c.m}
	if best != g {
		d.explore = Sampled
	}
	d.reason = fmt.Sprintf("%s for %s (%.0f%% accepted over %.1f decayed signals)", ReasonAffinity, task, 100*c.full.mean(), c.evidence)
	return d, true
}

// sampleArm draws a utility for every arm not settled and returns the
// index of the highest: Thompson sampling, with the spread scaled by
// routing's explore factor and narrowed for models dearer than the
// incumbent g (see dearer).
func (r *Router) sampleArm(cs []armView, g int) int {
	var buf [16]float64
	zs := buf[:0]
	r.randMu.Lock()
	for range cs {
		zs = append(zs, r.rnd.NormFloat64())
	}
	r.randMu.Unlock()
	best, bestU := g, math.Inf(-1)
	for i, c := range cs {
		if c.settled {
			continue
		}
		if u := c.faded.sample(r.explore*zs[i]/dearer(c.rel, cs[g].rel)) - r.lambda*c.rel; u > bestU {
			best, bestU = i, u
		}
	}
	return best
}

// dearer is 1 + ln(rel/relBest) for a model dearer than the best, else 1:
// the confidence needed to settle a model is divided by it, so a model
// forty times dearer than the best is settled on much less evidence than
// a cheaper one (trying it costs more and wins less often).
func dearer(rel, relBest float64) float64 {
	if rel <= relBest || relBest <= 0 {
		return 1
	}
	return 1 + math.Log(rel/relBest)
}

// applyBudget enforces the daily budgets for the current UTC day
// (routing.budget, or what an admin set with /budget): from 80% of a
// budget on, the cheapest model answers; at 100% only free models may
// answer, and without one the call is refused.
func (r *Router) applyBudget(ctx context.Context, conv core.ConversationKey, d *decision, excluded map[string]bool) error {
	l := r.limits()
	if !l.budgeted() {
		return nil
	}
	since := r.now().UTC().Truncate(24 * time.Hour)
	// label names the budget to a chat user, who cannot read the config.
	frac, key, label := 0.0, "", ""
	if l.daily > 0 {
		spent, err := r.o.Store.SpentSince(ctx, since, "")
		if err != nil {
			return fmt.Errorf("budget: %w", err)
		}
		frac, key = spent/l.daily, budgetKey(KeyDailyUSD, l.daily, l.dailyFromChat)
		label = "this bot's daily budget ($" + usd(l.daily) + ")"
	}
	if l.chatDaily > 0 && conv != (core.ConversationKey{}) {
		spent, err := r.o.Store.SpentSince(ctx, since, conv.String())
		if err != nil {
			return fmt.Errorf("budget: %w", err)
		}
		if f := spent / l.chatDaily; f > frac {
			frac, key = f, budgetKey(KeyChatDailyUSD, l.chatDaily, l.chatFromChat)
			label = "this conversation's daily budget ($" + usd(l.chatDaily) + ")"
		}
	}
	r.tellBudget(since, key, frac, conv)
	switch {
	case frac >= 1:
		d.budgetSpent = true
		if d.m.Price() == 0 {
			return nil
		}
		for _, m := range r.cat.byWeight {
			if m.Price() == 0 && !excluded[m.Ref] && !d.strict {
				d.m, d.reason = m, fmt.Sprintf("%s: %s used up; only free models answer", ReasonBudget, key)
				return nil
			}
		}
		left := since.Add(24 * time.Hour).Sub(r.now())
		return &core.Error{Kind: core.KindInvalid,
			Msg: fmt.Sprintf("%s is used up for today. It starts again at 00:00 UTC (in %s), or an admin raises it with /budget.", label, core.HumanDuration(left)),
			Err: fmt.Errorf("the daily budget %s is used up and no free model can answer; it resets at 00:00 UTC, or raise it with /budget or in the config", key)}
	case frac >= 0.8 && !d.strict:
		cheapest := d.m
		for _, m := range r.cat.byWeight {
			if !excluded[m.Ref] && m.Price() < cheapest.Price() {
				cheapest = m
			}
		}
		if cheapest.Ref != d.m.Ref {
			d.m, d.reason = cheapest, fmt.Sprintf("%s: %.0f%% of %s used; cheapest model", ReasonBudget, 100*frac, key)
		}
	}
	return nil
}

// budgetKey names a budget in messages: its key and amount, and whether
// it was set in chat.
func budgetKey(key string, v float64, fromChat bool) string {
	if fromChat {
		return key + " ($" + usd(v) + ", set with /budget)"
	}
	return key + " ($" + usd(v) + ")"
}

// tellBudget tells the operator events once per budget and UTC day that
// the budget at key reached 80% and 100%.
func (r *Router) tellBudget(day time.Time, key string, frac float64, conv core.ConversationKey) {
	if r.o.Events == nil || frac < 0.8 {
		return
	}
	if strings.Contains(key, "chat_daily_usd") {
		key += " in " + conv.String()
	}
	level := 80
	if frac >= 1 {
		level = 100
	}
	id := day.Format("2006-01-02") + " " + key
	r.mu.Lock()
	told := r.budgetTold[id]
	if level > told {
		if len(r.budgetTold) > 1000 {
			clear(r.budgetTold)
		}
		r.budgetTold[id] = level
	}
	r.mu.Unlock()
	if level <= told {
		return
	}
	kind, msg := core.EventBudgetWarning, fmt.Sprintf("%.0f%% of %s is spent today; the cheapest model answers from now on", 100*frac, key)
	if level == 100 {
		kind, msg = core.EventBudgetExhausted, fmt.Sprintf("%s is used up for today; only free models answer until 00:00 UTC", key)
	}
	r.o.Events.Emit(core.OpsEvent{Kind: kind, Subject: key, At: r.now(), Message: msg,
		Details: map[string]string{"budget": key, "spent_fraction": fmt.Sprintf("%.2f", frac), "day": day.Format("2006-01-02")},
		Once:    fmt.Sprintf("%s|%s|%d", id, kind, level)})
}

// largerWindow is the decision after every model of d's chain found the
// prompt too long: the catalog's models whose context_window is larger
// than the widest of the chain, heaviest first, within what the call
// needs, the budget and the models refused lately; false when there is
// none.
func (r *Router) largerWindow(c Call, d decision) (decision, bool) {
	widest := 0
	for _, m := range d.chain {
		widest = max(widest, m.ContextWindow)
	}
	excluded := map[string]bool{}
	for _, e := range c.Exclude {
		if m, ok := r.cat.resolve(e); ok {
			excluded[m.Ref] = true
		}
	}
	r.avoidRefused(excluded)
	var chain []Model
	for _, m := range r.cat.byWeight {
		if m.ContextWindow <= widest || excluded[m.Ref] || !m.canAll(c.Needs) || (d.budgetSpent && m.Price() > 0) {
			continue
		}
		chain = append(chain, m)
	}
	if len(chain) == 0 {
		return decision{}, false
	}
	return decision{m: chain[0], reason: ReasonWindow, chain: chain, budgetSpent: d.budgetSpent}, true
}

// chain is the failover order: the chosen model, then routing.fallbacks
// and routing.primary; a strict choice has no fallbacks.
func (r *Router) chain(d decision, excluded map[string]bool) []Model {
	out := []Model{d.m}
	if d.strict {
		return out
	}
	add := func(ref string) {
		m, ok := r.cat.resolve(ref)
		if !ok || excluded[m.Ref] || slices.ContainsFunc(out, func(x Model) bool { return x.Ref == m.Ref }) {
			return
		}
		if d.budgetSpent && m.Price() > 0 {
			return
		}
		out = append(out, m)
	}
	for _, f := range r.o.Fallbacks {
		add(f)
	}
	add(r.o.Primary)
	return out
}

// CurrentModel says which model would answer the session's next chat
// message and why (for /status and /model); it does not sample.
func (r *Router) CurrentModel(ctx context.Context, s core.Session) (model, reason string) {
	r.load(ctx)
	d, err := r.decide(ctx, Call{Session: &s, Conversation: s.Conversation}, TaskChat, false)
	if err != nil {
		return d.m.Ref, err.Error()
	}
	if !d.strict && r.o.Pin[TaskChat] == "" && d.reason != "" {
		return d.m.Ref, d.reason + "; the task type of each message may change this"
	}
	return d.m.Ref, d.reason
}
