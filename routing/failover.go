package routing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// run is the two-stage failover over d.chain: stage 1 rotates the
// provider's profiles on rate limits, auth failures, billing and
// timeouts (cooling each down; a timeout only when another request timed
// out on the profile too); stage 2 moves to the next model when
// every profile is cooling or the provider is down. A second pass sends
// at most one probe to a cooling profile whose interval has passed.
func (r *Router) run(ctx context.Context, c Call, d decision) (Result, error) {
	var streamed bool
	var lastErr error
	request := r.requestOf(c)
	tried := map[string]bool{}
	// picked are the profiles called; a trial among them (nextProfile)
	// is ended after its call, and here whatever way run ends.
	var picked []string
	defer func() {
		for _, id := range picked {
			r.endTrial(id)
		}
	}()
	tooLong := 0
	failedOn := "" // the model of the last failed attempt
	for pass := 0; pass < 2; pass++ {
	models:
		for _, m := range d.chain {
			if tooLong > 0 && m.ContextWindow <= tooLong {
				continue
			}
			for {
				p, ok := r.nextProfile(ctx, m, c.Session, pass == 1, tried)
				if !ok {
					break
				}
				picked = append(picked, p.ID)
				if failedOn != "" {
					r.o.Observer.Failover(failedOn, m.Ref)
				}
				t0, started := time.Now(), r.now()
				resp, err := r.attempt(ctx, c, m, p, started, &streamed)
				if errors.Is(err, errCooledWhileWaiting) {
					// Not sent: the credential is cooling now, and the
					// next one (or the chain's error, for the reason it
					// cooled) is as if it had been cooling when this call
					// picked it.
					r.endTrial(p.ID)
					lastErr = err
					continue
				}
				if core.ErrorKind(err) == core.KindMalformed && !streamed && ctx.Err() == nil {
					// An answer cut off or garbled on its way (a dropped
					// connection, a proxy's broken body) is most often
					// whole the next time: asked again once, before the
					// model is set aside. Nothing of it reached the user.
					r.o.Observer.LLMCall(m.Ref, m.Provider(), outcome(err), time.Since(t0))
					r.log.Warn("LLM answer unreadable; asking once more", "model", m.Ref, "profile", p.ID, "err", err)
					t0, started = time.Now(), r.now()
					resp, err = r.attempt(ctx, c, m, p, started, &streamed)
				}
				r.o.Observer.LLMCall(m.Ref, m.Provider(), outcome(err), time.Since(t0))
				r.endTrial(p.ID)
				failedOn = m.Ref
				if err == nil {
					r.succeed(ctx, m, p, started)
					r.ledger(ctx, c, m, resp)
					return Result{Response: resp, Model: m.Ref, Reason: d.reason, Profile: p.ID}, nil
				}
				kind := core.ErrorKind(err)
				if !rotates(kind) || ctx.Err() != nil {
					r.saveProfile(ctx, r.profileState(p)) // fail saves the others
				}
				if ctx.Err() != nil {
					return Result{Model: m.Ref, Reason: d.reason}, fmt.Errorf("%s: %w", m.Ref, err)
				}
				lastErr = fmt.Errorf("%s (profile %s): %w", m.Ref, p.ID, err)
				r.log.Warn("LLM call failed", "model", m.Ref, "profile", p.ID, "kind", kind.String(), "err", err)
				if streamed {
					return Result{Model: m.Ref, Reason: d.reason}, lastErr
				}
				switch kind {
				case core.KindInvalid:
					return Result{Model: m.Ref, Reason: d.reason}, lastErr
				case core.KindBadRequest:
					// The model refused the request (a parameter it does
					// not take, an id its provider does not know): another
					// credential would not help, another model may.
					r.refuse(m, err)
					if d.strict {
						return Result{Model: m.Ref, Reason: d.reason}, r.exhausted(d, lastErr)
					}
					continue models
				case core.KindContextTooLong:
					if d.strict {
						return Result{Model: m.Ref, Reason: d.reason}, lastErr
					}
					tooLong = max(m.ContextWindow, 1)
					continue models
				case core.KindTimeout:
					r.outage(m, started)
					r.timeout(ctx, p, request, started, err)
				case core.KindRateLimited, core.KindAuth, core.KindBilling:
					r.fail(ctx, p, started, err)
				default:
					r.outage(m, started)
					continue models
				}
			}
		}
	}
	return Result{Model: d.m.Ref, Reason: d.reason}, r.exhausted(d, lastErr)
}

// outcome names how an attempt ended, for the Observer.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return core.ErrorKind(err).String()
}

// exhausted builds the error for a chain with nothing left to try.
func (r *Router) exhausted(d decision, lastErr error) error {
	now := r.now()
	var soonest time.Time
	// cause is why the profile free soonest is cooling.
	cause := core.KindRateLimited
	// free says a credential of the chain is not cooling: the chain
	// failed otherwise (an outage, a timeout), and a cooling one's end
	// says nothing of when to come back (one credential's 52-minute
	// cooldown made a 20-second outage wait 7 minutes).
	free := false
	// trialing says a credential of the chain is being tried after its
	// cooldown by another call (see nextProfile): the caller comes back
	// shortly, for the reason it cooled down.
	trialing := false
	// probeAt is when the first cooling credential may be probed (see
	// nextProfile): a try then may find the provider back before its
	// cooldown ends.
	var probeAt time.Time
	r.mu.Lock()
	for _, m := range d.chain {
		for _, p := range r.profilesOf(m.Provider()) {
			st := r.pstate[p.ID]
			u := st.CooldownUntil
			if u.After(now) {
				if at := st.LastUsed.Add(r.probeEvery(st)); probeAt.IsZero() || at.Before(probeAt) {
					probeAt = at
				}
			}
			if !u.After(now) {
				free = true
				if r.trial[p.ID] && !trialing {
					trialing = true
					if k := kindNamed(st.LastError); k != core.KindUnknown {
						cause = k
					}
				}
				continue
			}
			if soonest.IsZero() || u.Before(soonest) {
				soonest = u
				if k := kindNamed(st.LastError); k != core.KindUnknown {
					cause = k
				}
			}
		}
	}
	r.mu.Unlock()
	if k := core.ErrorKind(lastErr); free && lastErr != nil && (k == core.KindUnavailable || k == core.KindTimeout) {
		soonest = time.Time{}
	}
	refs := make([]string, len(d.chain))
	for i, m := range d.chain {
		refs[i] = m.Ref
	}
	e := &core.Error{Kind: core.KindUnavailable, Err: lastErr}
	if lastErr != nil {
		e.Kind = core.ErrorKind(lastErr)
	}
	switch {
	case !soonest.IsZero():
		e.RetryAfter = soonest.Sub(now)
		if lastErr == nil {
			e.Kind = cause
		}
		if rc := max(probeAt.Sub(now), 0); rc < e.RetryAfter {
			e.Recheck = rc
		}
	case lastErr == nil && trialing:
		e.Kind, e.RetryAfter = cause, outageBase
	}
	if e.RetryAfter == 0 && e.Kind == core.KindRateLimited {
		// A rate limit whose cooldown is not (or no longer) recorded
		// here still asks for a wait: never "try again later", which the
		// caller would count as an attempt.
		e.RetryAfter = max(core.RetryAfter(lastErr), outageBase)
	}
	if e.RetryAfter == 0 && (e.Kind == core.KindUnavailable || e.Kind == core.KindTimeout) {
		// An outage is waited out like a rate limit: the hint grows with
		// the failures in a row, so the caller backs off.
		e.RetryAfter = r.outageWait(d.chain)
	}
	wait := "later"
	if e.RetryAfter > 0 {
		wait = "in " + core.HumanDuration(e.RetryAfter)
	}
	// A per-request model (opentalon complete --model, a plugin's or a
	// Lua script's call naming one) is no /model pin: /model auto would
	// not change it, and there may be no conversation.
	asked := d.strict && strings.HasPrefix(d.reason, ReasonRequest)
	switch {
	case e.Kind == core.KindBadRequest && asked:
		e.Msg = fmt.Sprintf("the model this request asked for (%s) refused it, and a model asked for is never switched silently; the operator has been told", d.m.Ref)
	case asked:
		e.Msg = fmt.Sprintf("the model this request asked for (%s) is failing, and a model asked for is never switched silently; try again %s", d.m.Ref, wait)
	case e.Kind == core.KindBadRequest && d.strict:
		e.Msg = fmt.Sprintf("the model pinned for this conversation (%s) refused the request, and a pinned model is never switched silently; the operator has been told. Send /model auto to let me choose, or /model to pin another", d.m.Ref)
	case e.Kind == core.KindBadRequest:
		e.Msg = fmt.Sprintf("the models that could answer refused the request (%s); the operator has been told", strings.Join(refs, ", "))
	case d.strict:
		e.Msg = fmt.Sprintf("the model pinned for this conversation (%s) is failing and a pinned model is never switched silently; try again %s, or send /model auto to let me choose", d.m.Ref, wait)
	default:
		e.Msg = fmt.Sprintf("every model in the failover chain failed or is cooling down (%s); try again %s", strings.Join(refs, ", "), wait)
	}
	return e
}

// modelHealth is what a model's failures since its last success say: its
// run of refused requests (an HTTP 400 other than a too-long context),
// for which the router's own choices avoid it until avoid (a cooldown on
// the ladder of auth.cooldowns), and its outages in a row (5xx, an
// unreachable server, a timeout), which set how long a caller waits.
type modelHealth struct {
	refusals int
	avoid    time.Time
	reason   string
	outages  int
	// outageAt is when the last outage was counted.
	outageAt time.Time
}

// outageBase is the wait after an outage; each outage in a row doubles
// it, up to auth.cooldowns.initial.
const outageBase = 2 * time.Second

// outage counts a failure of m, of a call started at started, that says
// its provider is down for now. An outage in a row is one that outlasted
// the wait the last one told its callers: the failures of calls already
// on their way when one was counted, or made before its wait is over
// (other conversations' messages), are the same outage and do not count
// again (30 conversations failing in a 2-second outage made the next wait
// a minute, as if it were 30 outages in a row).
func (r *Router) outage(m Model, started time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.health == nil {
		r.health = map[string]modelHealth{}
	}
	h := r.health[m.Ref]
	if h.outages > 0 && (started.Before(h.outageAt) || r.now().Before(h.outageAt.Add(r.outageStep(h.outages)))) {
		return
	}
	h.outages++
	h.outageAt = r.now()
	r.health[m.Ref] = h
}

// outageWait is how long a caller should wait before asking chain again
// after outages: outageBase doubled per outage in a row of the chain's
// model with the fewest (one answering model is enough), up to
// auth.cooldowns.initial (at least outageBase).
func (r *Router) outageWait(chain []Model) time.Duration {
	r.mu.Lock()
	n := 0
	for i, m := range chain {
		if k := r.health[m.Ref].outages; i == 0 || k < n {
			n = k
		}
	}
	r.mu.Unlock()
	return r.outageStep(n)
}

// outageStep is the wait after n outages in a row: outageBase doubled
// per outage after the first, up to auth.cooldowns.initial (at least
// outageBase).
func (r *Router) outageStep(n int) time.Duration {
	top := max(r.o.Cooldowns.Initial, outageBase)
	d := outageBase
	for i := 1; i < n && d < top; i++ {
		d *= 2
	}
	return min(d, top)
}

// refuse counts a request m refused, so the router's own choices avoid m
// for a while (a /model pin or a per-request model still calls it), and
// tells the operator: a refusal is a config problem (a parameter the
// model does not take, a model id its provider does not know) that no
// retry fixes.
func (r *Router) refuse(m Model, err error) {
	reason := err.Error()
	var ce *core.Error
	if errors.As(err, &ce) && ce.Err != nil {
		reason = ce.Err.Error() // the provider's own words
	}
	r.mu.Lock()
	now := r.now()
	if r.health == nil {
		r.health = map[string]modelHealth{}
	}
	h := r.health[m.Ref]
	h.refusals++
	h.avoid, h.reason = now.Add(r.o.Cooldowns.step(h.refusals)), reason
	r.health[m.Ref] = h
	r.mu.Unlock()
	r.log.Warn("model refused a request; routing avoids it for a while", "model", m.Ref, "until", h.avoid, "refusals", h.refusals, "err", err)
	if r.o.Events != nil {
		r.o.Events.Emit(core.OpsEvent{Kind: core.EventModelRefused, Subject: m.Ref, At: now,
			Message: fmt.Sprintf("model %s refused a request (HTTP 400: %s); routing avoids it until %s. Check its entry in models.catalog (the model id, max_output_tokens, capabilities) and the provider's documentation", m.Ref, reason, h.avoid.UTC().Format(time.RFC3339)),
			Details: map[string]string{"model": m.Ref, "provider": m.Provider(), "reason": reason, "until": h.avoid.UTC().Format(time.RFC3339), "refusals": fmt.Sprint(h.refusals)}})
	}
}

// avoidRefused adds to excluded the models that refused a request and are
// still avoided, unless that would leave no model to choose.
func (r *Router) avoidRefused(excluded map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.health) == 0 {
		return
	}
	now := r.now()
	var avoid []string
	for ref, h := range r.health {
		if h.avoid.After(now) && !excluded[ref] {
			avoid = append(avoid, ref)
		}
	}
	if len(avoid) == 0 {
		return
	}
	left := 0
	for _, m := range r.cat.byWeight {
		if !excluded[m.Ref] {
			left++
		}
	}
	if left <= len(avoid) {
		return
	}
	for _, ref := range avoid {
		excluded[ref] = true
	}
}

// Refused says until when the router's own choices avoid a model that
// refused a request, and the provider's reason (zero when it does not).
func (r *Router) Refused(ref string) (until time.Time, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.health[ref]
	if !h.avoid.After(r.now()) {
		return time.Time{}, ""
	}
	return h.avoid, h.reason
}

// profilesOf returns a provider's profiles, or one keyless profile.
func (r *Router) profilesOf(prov string) []Profile {
	if ps := r.o.Profiles[prov]; len(ps) > 0 {
		return ps
	}
	return []Profile{{ID: prov + ":default", Provider: prov}}
}

// rotates says a failure of kind cools the profile down and moves to the
// next profile (fail persists the profile's state).
func rotates(kind core.Kind) bool {
	switch kind {
	case core.KindRateLimited, core.KindAuth, core.KindTimeout, core.KindBilling:
		return true
	}
	return false
}

// profileState is the in-memory state of p.
func (r *Router) profileState(p Profile) core.ProfileState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pstate[p.ID]
}

// nextProfile picks the next untried profile for m's provider and marks
// it used. In the probe pass only a cooling profile whose last call is at
// least the initial cooldown ago is taken (at most one probe per interval).
func (r *Router) nextProfile(ctx context.Context, m Model, sess *core.Session, probe bool, tried map[string]bool) (Profile, bool) {
	prov := m.Provider()
	pinned, kept := "", ""
	if sess != nil {
		// The user's /model @id; and the profile that wrote the session's
		// last answer, kept among equals (orderProfiles): one credential
		// per conversation keeps the provider's prompt cache warm. Either
		// gives way while it cools down; /new starts a session with none.
		pinned, kept = sess.ProfilePin, sess.State.ActiveProfile
	}
	r.mu.Lock()
	now := r.now()
	var chosen Profile
	var st core.ProfileState
	found := false
	for _, p := range orderProfiles(r.profilesOf(prov), r.pstate, pinned, kept, r.o.AuthOrder[prov], now) {
		key := m.Ref + "|" + p.ID
		if tried[key] {
			continue
		}
		st = r.pstate[p.ID]
		recovering := st.Failures > 0 || st.BillingFailures > 0 || st.CooldownUntil.After(now)
		if recovering && r.trial[p.ID] {
			// One call at a time finds out whether a credential that
			// failed is back: the messages that waited out its cooldown
			// do not all hit it at once when it ends (and climb its
			// ladder together when it is not back yet).
			continue
		}
		if st.CooldownUntil.After(now) {
			// A probe at most every cooldowns.initial, or as often as the
			// server's own Retry-After asked when that is sooner: the
			// ladder may rest a credential far longer than the server
			// asked, and the probe is what finds it back. A credential
			// refused before this process started is tried once at once:
			// its key may have been fixed.
			fixed := r.refreshed[p.ID]
			if !fixed && (!probe || now.Sub(st.LastUsed) < r.probeEvery(st)) {
				continue
			}
			delete(r.refreshed, p.ID)
			if fixed {
				r.tryingFixed[p.ID] = true
			} else {
				st.LastProbe = now
				r.probedAt[p.ID] = now
			}
		}
		tried[key] = true
		if recovering {
			r.trial[p.ID] = true // ended by endTrial once the call returns
		}
		st.Provider, st.ID = prov, p.ID
		st.LastUsed = now
		st.Uses++
		r.pstate[p.ID] = st
		chosen, found = p, true
		break
	}
	r.mu.Unlock()
	// The use is persisted after the attempt (by succeed, fail or run),
	// not here: one database write less before the LLM request.
	return chosen, found
}

// kindNamed is the kind whose String is s (KindUnknown for none).
func kindNamed(s string) core.Kind {
	for k := core.Kind(0); !strings.HasPrefix(k.String(), "kind("); k++ {
		if k.String() == s {
			return k
		}
	}
	return core.KindUnknown
}

// requestOf names the request a call serves, to tell the timeouts of one
// request from those of many: its conversation (whose requests run one
// at a time), or a number of its own outside a conversation.
func (r *Router) requestOf(c Call) string {
	conv := c.Conversation
	if conv == (core.ConversationKey{}) && c.Session != nil {
		conv = c.Session.Conversation
	}
	if conv != (core.ConversationKey{}) {
		return conv.String()
	}
	return fmt.Sprintf("call#%d", r.calls.Add(1))
}

// timeout handles a call to p that got no answer in time. One slow
// request (a very long answer) says nothing about the credential every
// conversation shares, so it does not cool p; a timeout of a second,
// different request before p's next success does (the provider is
// hanging for everyone).
func (r *Router) timeout(ctx context.Context, p Profile, request string, started time.Time, err error) {
	r.mu.Lock()
	prev, seen := r.timedOut[p.ID]
	r.timedOut[p.ID] = request
	st := r.pstate[p.ID]
	r.mu.Unlock()
	if seen && prev != request {
		r.fail(ctx, p, started, err)
		return
	}
	r.log.Info("LLM call timed out; one request's timeout does not cool the auth profile", "profile", p.ID)
	r.saveProfile(ctx, st)
}

// fail cools a profile down after a failure of a rotating kind of a
// call that started at started. Each failure climbs the cooldown ladder
// one step, except one of a call already under way when the ladder last
// climbed: a rate limit fails every call in flight at once, and that is
// one event, not as many steps as there were calls (five concurrent 429s
// would otherwise rest the credential for ten minutes). Such a failure
// keeps the cooldown at least what its own first step would be.
func (r *Router) fail(ctx context.Context, p Profile, started time.Time, err error) {
	r.mu.Lock()
	now := r.now()
	st := r.pstate[p.ID]
	st.Provider, st.ID = p.Provider, p.ID
	kind := core.ErrorKind(err)
	// The server's own Retry-After, when it gives one, is where the
	// ladder starts instead of Initial: the first failure rests what the
	// server asked, and repeated ones back off from there (a server
	// answering "retry after 1s" to every call is not called every
	// second).
	base := r.o.Cooldowns.Initial
	if ra := core.RetryAfter(err); ra > 0 {
		base = ra
	}
	var cd time.Duration
	probed, wasProbe := r.probedAt[p.ID]
	wasProbe = wasProbe && !started.Before(probed)
	delete(r.probedAt, p.ID)
	wasFixed := r.tryingFixed[p.ID]
	delete(r.tryingFixed, p.ID)
	switch last, ok := r.stepped[p.ID]; {
	case wasFixed:
		// The credential refused before this process started is still
		// refused: its cooldown stands, without another step.
		cd = max(st.CooldownUntil.Sub(now), base)
	case wasProbe && kind != core.KindBilling && core.RetryAfter(err) > 0:
		// A probe that the server refuses again with a Retry-After rests
		// the credential at least what the server asks now, without
		// climbing the ladder (probes as often as the server asked would
		// otherwise climb it to hours while the server asked for
		// seconds), and without cutting the ladder's cooldown short
		// either: a rest shorter than it let the waiting messages call
		// between the probes, and each such call climbed the ladder, to
		// an hour within a minute of "Retry-After: 1".
		cd = max(st.CooldownUntil.Sub(now), base)
	case ok && started.Before(last):
		first := base
		if kind == core.KindBilling {
			first = r.o.Cooldowns.billingStep(1)
		}
		cd = max(st.CooldownUntil.Sub(now), first)
	case kind == core.KindBilling:
		st.BillingFailures++
		cd = r.o.Cooldowns.billingStep(st.BillingFailures)
		r.stepped[p.ID] = now
	default:
		idle := max(r.o.Cooldowns.ladder(base, max(st.Failures, 1)), r.o.Cooldowns.Initial)
		if !st.CooldownUntil.IsZero() && now.Sub(st.CooldownUntil) > idle {
			// Its last cooldown ended longer ago than it lasted (and
			// than cooldowns.initial), with no call since to reset it
			// (the conversations kept another credential): this is a
			// new episode, and its ladder starts over (a single 429
			// cooled a credential left idle for 52 minutes, the fourth
			// step of a ladder an hour old). Not sooner: a waiting
			// message comes back after its queue backoff, seconds after
			// a cooldown of a second ended, and that call is the same
			// episode (compared with the cooldown alone, a server
			// answering "Retry-After: 1" restarted the ladder on every
			// call and was called every 2 s).
			st.Failures = 0
		}
		st.Failures++
		cd = r.o.Cooldowns.ladder(base, st.Failures)
		r.stepped[p.ID] = now
	}
	st.CooldownUntil = now.Add(cd)
	st.LastError = kind.String()
	r.failedAt[p.ID], r.failedKind[p.ID] = now, kind
	// Kept with the cooldown (stored): the probes follow it after a
	// restart and on every replica.
	st.RetryAfter = core.RetryAfter(err)
	r.pstate[p.ID] = st
	all, until := r.allCoolingLocked(p.Provider, now)
	tell := all && !r.cooling[p.Provider] && r.o.Events != nil
	if all {
		r.cooling[p.Provider] = true
	}
	r.mu.Unlock()
	r.log.Info("auth profile cooling down", "profile", p.ID, "for", cd, "kind", kind.String())
	r.saveProfile(ctx, st)
	if tell {
		r.o.Events.Emit(core.OpsEvent{Kind: core.EventProviderCooling, Subject: p.Provider, At: now,
			Message: fmt.Sprintf("every credential of provider %s is cooling down (last: %s); the first is free again at %s", p.Provider, kind, until.UTC().Format(time.RFC3339)),
			Details: map[string]string{"provider": p.Provider, "kind": kind.String(), "until": until.UTC().Format(time.RFC3339)}})
	}
}

// allCoolingLocked reports whether every profile of prov is cooling at
// now, and when the first of them is free again. r.mu is held.
func (r *Router) allCoolingLocked(prov string, now time.Time) (bool, time.Time) {
	var soonest time.Time
	for _, q := range r.profilesOf(prov) {
		u := r.pstate[q.ID].CooldownUntil
		if !u.After(now) {
			return false, time.Time{}
		}
		if soonest.IsZero() || u.Before(soonest) {
			soonest = u
		}
	}
	return true, soonest
}

// profileSaveEvery is how often the use of a healthy profile is persisted:
// its in-memory state is exact; the stored copy (round-robin order after a
// restart, /models) may lag by this much. A change of its failure state is
// persisted at once.
const profileSaveEvery = 30 * time.Second

// endTrial ends the trial call of profile id, if one was under way (see
// nextProfile): its outcome is recorded, the next call may go.
func (r *Router) endTrial(id string) {
	r.mu.Lock()
	delete(r.trial, id)
	r.mu.Unlock()
}

// minProbeEvery bounds how often a cooling profile is probed, whatever
// its server's Retry-After.
const minProbeEvery = 5 * time.Second

// probeEvery is how often a cooling profile in state st is probed: every
// cooldowns.initial, or as often as its server's own Retry-After asked
// when that is sooner (at least minProbeEvery).
func (r *Router) probeEvery(st core.ProfileState) time.Duration {
	every := r.o.Cooldowns.Initial
	if pe := st.RetryAfter; pe > 0 && pe < every {
		every = max(pe, minProbeEvery)
	}
	return every
}

// succeed resets a profile's failure state (and m's health) and persists
// it with the use nextProfile counted, for a call that started at
// started. A credential that had failed (a cooldown, failures in a row)
// is back: Options.OnBack is told. A call that started before the
// credential's latest failure is older news (calls in flight when a rate
// limit began finish as they please): the failure's cooldown stands.
func (r *Router) succeed(ctx context.Context, m Model, p Profile, started time.Time) {
	r.mu.Lock()
	if at, ok := r.failedAt[p.ID]; ok && started.Before(at) && r.pstate[p.ID].CooldownUntil.After(r.now()) {
		r.mu.Unlock()
		return
	}
	delete(r.failedAt, p.ID)
	delete(r.health, m.Ref)
	delete(r.timedOut, p.ID)
	delete(r.probedAt, p.ID)
	delete(r.tryingFixed, p.ID)
	delete(r.cooling, p.Provider)
	st := r.pstate[p.ID]
	healthy := st.Failures == 0 && st.BillingFailures == 0 && st.CooldownUntil.IsZero() && st.LastError == "" && st.RetryAfter == 0
	st.Failures, st.BillingFailures, st.CooldownUntil, st.LastError, st.RetryAfter = 0, 0, time.Time{}, "", 0
	r.pstate[p.ID] = st
	now := r.now()
	skip := healthy && now.Sub(r.savedAt[p.ID]) < profileSaveEvery
	if !skip {
		r.savedAt[p.ID] = now
	}
	r.mu.Unlock()
	if !skip {
		r.saveProfile(ctx, st)
	}
	if !healthy && r.o.OnBack != nil {
		go r.o.OnBack(p.Provider)
	}
}

// refreshProfiles re-reads the profiles' state every
// Options.SharedProfiles, where other replicas save theirs, and merges it
// (mergeProfile): a cooldown another replica set is seen here within that
// time. The probes' spend today (routing.explore.daily_usd) is read from
// the usage ledger then too, so the cap holds for the cluster, and the
// settings admins made in chat (/budget, /allowed) on any replica.
func (r *Router) refreshProfiles(ctx context.Context) {
	every := r.o.SharedProfiles
	if every <= 0 {
		return
	}
	r.mu.Lock()
	now := r.now()
	due := !r.profilesAt.IsZero() && now.Sub(r.profilesAt) >= every
	if due {
		r.profilesAt = now // one reader at a time; the others go on
	}
	r.mu.Unlock()
	if !due {
		return
	}
	// The probes' and the judge's spend today, every replica's, is the
	// ledger's.
	day := now.UTC().Truncate(24 * time.Hour)
	spent, judged, spentOK := 0.0, 0.0, false
	if lt, ok := r.o.Store.(ledgerTotals); ok && (r.probe.DailyUSD > 0 || r.o.Judge.DailyUSD > 0) {
		if totals, err := lt.UsageTotals(ctx, day, "purpose", ""); err != nil {
			r.log.Warn("read the probes' and the judge's spend from the ledger", "err", err)
		} else {
			spentOK = true
			for _, t := range totals {
				switch t.Key {
				case PurposeExplore:
					spent = t.CostUSD
				case PurposeJudge:
					judged = t.CostUSD
				}
			}
		}
	}
	ps, err := r.o.Store.ProfileStates(ctx)
	if err != nil {
		r.log.Warn("read the auth profiles' state", "err", err)
	}
	// The budgets and allowlist another replica's admin set in chat.
	r.loadSettings(ctx)
	var back []string // providers another replica found back
	r.mu.Lock()
	defer func() {
		r.mu.Unlock()
		if r.o.OnBack != nil {
			for _, prov := range back {
				go r.o.OnBack(prov)
			}
		}
	}()
	for _, p := range ps {
		local := r.pstate[p.ID]
		if recoveredElsewhere(local, p, r.failedAt[p.ID]) {
			delete(r.failedAt, p.ID)
			delete(r.cooling, p.Provider)
			if !slices.Contains(back, p.Provider) {
				back = append(back, p.Provider)
			}
		}
		r.pstate[p.ID] = mergeProfile(local, p, r.failedAt[p.ID])
	}
	if spentOK {
		if !day.Equal(r.exploreDay) {
			r.exploreDay, r.exploreSpent = day, 0
		}
		r.exploreSpent = max(r.exploreSpent, spent)
		if !day.Equal(r.judgeDay) {
			r.judgeDay, r.judgeSpent = day, 0
		}
		r.judgeSpent = max(r.judgeSpent, judged)
	}
}

// ledgerTotals is the usage ledger's sums (store.DB), read for the probes'
// and the judge's spend across replicas.
type ledgerTotals interface {
	UsageTotals(ctx context.Context, since time.Time, by, conversation string) ([]core.UsageTotal, error)
}

// mergeProfile is a profile's state here merged with the stored one: a
// success elsewhere after the failure here (failedAt) clears it
// (recoveredElsewhere); the later cooldown wins, with the failures, error
// and server's Retry-After that set it; uses and times only grow.
func mergeProfile(local, stored core.ProfileState, failedAt time.Time) core.ProfileState {
	out := local
	out.Provider, out.ID = stored.Provider, stored.ID
	if recoveredElsewhere(local, stored, failedAt) {
		out.CooldownUntil, out.Failures, out.BillingFailures, out.LastError, out.RetryAfter = time.Time{}, 0, 0, "", 0
	}
	if stored.CooldownUntil.After(local.CooldownUntil) {
		out.CooldownUntil, out.Failures, out.BillingFailures, out.LastError, out.RetryAfter = stored.CooldownUntil, stored.Failures, stored.BillingFailures, stored.LastError, stored.RetryAfter
	}
	out.Uses = max(local.Uses, stored.Uses)
	if stored.LastUsed.After(local.LastUsed) {
		out.LastUsed = stored.LastUsed
	}
	if stored.LastProbe.After(local.LastProbe) {
		out.LastProbe = stored.LastProbe
	}
	return out
}

// recoveredElsewhere says the stored state is another replica's success
// with a call started after the failure here (failedAt, when this
// replica recorded it; else its last call on the credential): the
// credential works, and its cooldown here is stale. A later cooldown
// alone won the merge, so a success elsewhere never cleared it, and this
// replica kept waiting while the others answered.
func recoveredElsewhere(local, stored core.ProfileState, failedAt time.Time) bool {
	failed := !local.CooldownUntil.IsZero() || local.Failures > 0 || local.BillingFailures > 0
	ok := stored.CooldownUntil.IsZero() && stored.Failures == 0 && stored.BillingFailures == 0
	return failed && ok && stored.LastUsed.After(local.LastUsed) && stored.LastUsed.After(failedAt)
}

func (r *Router) saveProfile(ctx context.Context, st core.ProfileState) {
	if err := r.o.Store.SaveProfileState(context.WithoutCancel(ctx), st); err != nil {
		r.log.Error("save auth profile state", "profile", st.ID, "err", err)
	}
}

// ProfileStatus is one profile's health for /models.
type ProfileStatus struct {
	Profile       Profile
	CooldownUntil time.Time
	LastError     string
	Uses          int64
}

// Profiles returns the health of a provider's profiles.
func (r *Router) Profiles(prov string) []ProfileStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ProfileStatus
	for _, p := range r.profilesOf(prov) {
		st := r.pstate[p.ID]
		out = append(out, ProfileStatus{Profile: p, CooldownUntil: st.CooldownUntil, LastError: st.LastError, Uses: st.Uses})
	}
	return out
}
