package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// isAdmin reports whether in's sender is an admin of its channel (by
// the config; see also the Authorizer's AuthAdmin). A message no platform
// delivered has no admin sender.
func (g *Gateway) isAdmin(in core.Inbound) bool {
	if in.Origin != "" {
		return false
	}
	p, ok := g.opts.Access[in.Conversation.Channel]
	return ok && (p.Operator || in.UserID != "" && slices.Contains(p.Admins, in.UserID))
}

// authorizes reports whether the Authorizer applies to in.
func (g *Gateway) authorizes(in core.Inbound) bool {
	if g.opts.Authorizer == nil || in.Origin != "" {
		return false
	}
	if p := g.opts.Access[in.Conversation.Channel]; p.Operator {
		return false
	}
	return len(g.opts.AuthChannels) == 0 || slices.Contains(g.opts.AuthChannels, in.Conversation.Channel)
}

// authorized asks the Authorizer about in's sender: ok=false refuses the
// message; an error is logged and refuses it (fail closed).
func (g *Gateway) authorized(ctx context.Context, in core.Inbound) (ok, admin bool) {
	d, err := g.opts.Authorizer.Authorize(ctx, in.Conversation.Channel, in.Conversation.Chat, in.UserID)
	if err != nil {
		g.log.Warn("the auth provider failed; the user is refused (fail closed)", "channel", in.Conversation.Channel, "user", in.UserID, "err", err)
		return false, false
	}
	return d == core.AuthAllow || d == core.AuthAdmin, d == core.AuthAdmin
}

// admitted reports whether in's sender may talk to the bot on its
// channel; for an unknown user in pairing mode it also returns their
// pairing record (nil when they have none yet).
func (g *Gateway) admitted(ctx context.Context, in core.Inbound) (bool, *core.Pairing, error) {
	ok, rec, err := g.admittedByChannel(ctx, in)
	if err != nil || !ok || !g.authorizes(in) || g.isAdmin(in) {
		return ok, rec, err
	}
	// The channel admitted the user; the auth provider has the last word.
	ok, _ = g.authorized(ctx, in)
	return ok, nil, nil
}

var _ core.AccessChecker = (*Gateway)(nil)

// MayTalk implements core.AccessChecker: the channel's access rule and
// the auth provider, as at intake; a failure to decide refuses. At intake
// the platform adapter has applied allow_users before; nobody has here,
// so an id not on a non-empty list is refused too, unless the list holds
// names (which only the adapter can match to a user).
func (g *Gateway) MayTalk(ctx context.Context, in core.Inbound) bool {
	ok, _, err := g.admitted(ctx, in)
	if err != nil || !ok {
		return false
	}
	p := g.opts.Access[in.Conversation.Channel]
	if p.Mode == core.AccessPairing || p.Operator || len(p.Users) == 0 || g.isAdmin(in) {
		return true
	}
	named := false
	for _, u := range p.Users {
		u = strings.TrimSpace(u)
		if u != "" && strings.EqualFold(u, in.UserID) {
			return true
		}
		// "@name", or a lower-case entry: a username (ids are digits, or
		// Slack's upper-case letters and digits).
		named = named || strings.HasPrefix(u, "@") || u != strings.ToUpper(u)
	}
	return named
}

// admittedByChannel is admitted by the channel's own access rule.
func (g *Gateway) admittedByChannel(ctx context.Context, in core.Inbound) (bool, *core.Pairing, error) {
	channel := in.Conversation.Channel
	p, ok := g.opts.Access[channel]
	if !ok || p.Mode == core.AccessOpen || p.Mode == "" || g.isAdmin(in) {
		return true, nil, nil
	}
	switch p.Mode {
	case core.AccessAllowlist:
		return len(p.Users) > 0, nil, nil
	case core.AccessPairing:
		if in.UserID == "" {
			return false, nil, nil
		}
		if slices.Contains(p.Users, in.UserID) {
			return true, nil, nil
		}
		if g.opts.Pairings == nil {
			return false, nil, core.Errorf(core.KindInvalid, "channel %s pairs users but the gateway has no pairing store", channel)
		}
		rec, err := g.opts.Pairings.Pairing(ctx, channel, in.UserID)
		if err != nil {
			return false, nil, fmt.Errorf("look up the pairing of %s user %s: %w", channel, in.UserID, err)
		}
		return rec != nil && rec.Status == core.PairingApproved, rec, nil
	}
	return false, nil, nil
}

// admit decides at intake whether a message may go on: nothing from a
// user who may not talk to the bot is queued, so nothing of it reaches
// the LLM. An unknown user in pairing mode is given a pairing code (at
// most one notice an hour per conversation, see pairingReminderDue, but
// a slash command's each time: only its user sees it, or it fills the
// response Discord already shows);
// everyone else refused is ignored, but a slash command (tellRefused).
func (g *Gateway) admit(ctx context.Context, in core.Inbound) (bool, error) {
	ok, rec, err := g.admittedByChannel(ctx, in)
	if err != nil {
		return false, err
	}
	if ok {
		if !g.authorizes(in) || g.isAdmin(in) {
			return true, nil
		}
		if ok, _ = g.authorized(ctx, in); !ok {
			g.obs.Finished(in.Conversation.Channel, core.EventMessage, core.OutcomeRefused)
			g.log.Debug("message from a user the auth provider refused ignored", "channel", in.Conversation.Channel)
			g.tellRefused(in)
		}
		return ok, nil
	}
	g.obs.Finished(in.Conversation.Channel, core.EventMessage, core.OutcomeRefused)
	if g.opts.Access[in.Conversation.Channel].Mode != core.AccessPairing || in.UserID == "" {
		g.log.Debug("message from a user not allowed on this channel ignored", "channel", in.Conversation.Channel, "access", g.opts.Access[in.Conversation.Channel].Mode)
		g.tellRefused(in)
		return false, nil
	}
	if rec != nil && core.PairingExpired(*rec, g.now()) {
		// Its code can no longer be approved: it goes, with every other
		// expired request, and the user gets a new one.
		if _, err := g.opts.Pairings.ExpirePairings(ctx, g.now().Add(-core.PairingTTL)); err != nil {
			return false, fmt.Errorf("expire pairing requests: %w", err)
		}
		rec = nil
	}
	if rec == nil {
		all, err := g.opts.Pairings.Pairings(ctx, in.Conversation.Channel)
		if err != nil {
			return false, fmt.Errorf("count pairing requests: %w", err)
		}
		waiting, expired := 0, 0
		for _, r := range all {
			switch {
			case core.PairingExpired(r, g.now()):
				expired++
			case r.Status == core.PairingPending:
				waiting++
			}
		}
		if expired > 0 {
			// The requests of strangers who never wrote again go here,
			// or they stay in the table for good (a flood of strangers
			// would grow it by up to MaxPendingPairings a day).
			if _, err := g.opts.Pairings.ExpirePairings(ctx, g.now().Add(-core.PairingTTL)); err != nil {
				return false, fmt.Errorf("expire pairing requests: %w", err)
			}
		}
		if waiting >= core.MaxPendingPairings {
			if g.noticeDue("pairing-full:" + in.Conversation.Channel) {
				g.log.Warn("too many pairing requests are waiting on this channel: an unknown user got no code; approve or deny some (/pair, opentalon pair list)",
					"channel", in.Conversation.Channel, "waiting", waiting)
			}
			g.tellRefused(in)
			return false, nil
		}
		p := core.Pairing{Channel: in.Conversation.Channel, UserID: in.UserID, UserName: in.UserName,
			Conversation: in.Conversation, Status: core.PairingPending, RequestedAt: g.now()}
		for try := 0; ; try++ {
			p.Code = core.NewPairingCode()
			got, err := g.opts.Pairings.RequestPairing(ctx, p)
			if errors.Is(err, core.ErrPairingCodeTaken) && try < 3 {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("record a pairing request: %w", err)
			}
			rec = &got
			break
		}
		g.log.Info("pairing requested; approve with /pair approve CODE or opentalon pair approve CODE",
			"channel", rec.Channel, "code", rec.Code, "user", rec.UserName)
		g.emitPairingRequested(*rec)
	}
	if rec.Status != core.PairingPending {
		g.tellRefused(in) // denied: nothing is sent, but to a command that waits for it
		return false, nil
	}
	// A command answered only to its sender, or one its platform waits
	// for, is told each time: nobody else sees it, or the platform
	// waits.
	if g.pairingReminderDue(in, rec.Code) || in.Ephemeral || in.Awaited {
		// A reminder says how long the code still holds, not the
		// 24 hours it held when it was made.
		left := max(1, int(math.Ceil((core.PairingTTL - g.now().Sub(rec.RequestedAt)).Hours())))
		hours := "hours"
		if left == 1 {
			hours = "hour"
		}
		g.notify(in, fmt.Sprintf("🔒 I answer only people an admin of this bot has approved. Your pairing code is %s: ask an admin to send /pair approve %s. The code is valid for %d %s; until it is approved I do not answer your messages.",
			rec.Code, rec.Code, left, hours))
	}
	return false, nil
}

// maxApprovedListed bounds the approved users /pair lists (the latest
// to ask first); `opentalon pair list` lists them all.
const maxApprovedListed = 20

// pairingRemindEvery bounds how often a user waiting for approval is
// told their code again: they have it, and a notice for each message
// they write meanwhile is spam.
const pairingRemindEvery = time.Hour

// pairingReminderDue reports whether the sender of in is to be told
// their pairing code: at once for a code they were not told yet in this
// conversation (told in a group, they are told again in their DM, where
// they look now), then once every pairingRemindEvery.
func (g *Gateway) pairingReminderDue(in core.Inbound, code string) bool {
	return g.noticeDueEvery("pair:"+in.Conversation.String()+":"+in.UserID+":"+code, pairingRemindEvery)
}

// emitPairingRequested tells the operator's notification sinks that a
// user asks to talk to the bot, and how to let them: without it, an
// admin learns of a request only by reading the log or running /pair.
func (g *Gateway) emitPairingRequested(rec core.Pairing) {
	if g.opts.Events == nil {
		return
	}
	who := rec.UserID
	if rec.UserName != "" {
		// The name is the stranger's to choose and the message is
		// markdown a chat sink renders: as code, a name such as
		// "[approve here](https://…)" shows as written, not as a link.
		who = inlineCode(rec.UserName) + " (user " + rec.UserID + ")"
	} else {
		who = "user " + who
	}
	g.opts.Events.Emit(core.OpsEvent{
		Kind: core.EventPairingRequested, Subject: rec.Channel + " " + rec.Code, At: g.now(),
		Message: fmt.Sprintf("%s asks to talk to the bot on %s: approve with /pair approve %s in chat or `opentalon pair approve %s` (or deny); the code expires in %d hours.",
			who, rec.Channel, rec.Code, rec.Code, int(core.PairingTTL.Hours())),
		Details: map[string]string{"channel": rec.Channel, "user": rec.UserID, "code": rec.Code},
	})
}

// inlineCode is s as a markdown code span on one line: its backticks
// and line breaks, which could end the span, are replaced.
func inlineCode(s string) string {
	return "`" + strings.NewReplacer("`", "'", "\r", " ", "\n", " ").Replace(s) + "`"
}

// tellRefused answers a platform command of someone the bot does not
// answer when only they see the answer (Inbound.Ephemeral: a Slack or
// Discord slash command), or when the platform waits for one
// (Inbound.Awaited: Discord shows "thinking…" until it gives up). A
// message is ignored, as before.
func (g *Gateway) tellRefused(in core.Inbound) {
	if in.Ephemeral || in.Awaited {
		g.notify(in, "This bot does not answer you here.")
	}
}

// cmdPair is /pair: list, approve and deny the pairing requests of the
// admin's channel.
func (g *Gateway) cmdPair(ctx context.Context, req core.CommandRequest) (string, error) {
	const usage = "Usage: /pair to list the pending requests, /pair approve CODE, /pair deny CODE, /pair approved to list the approved (deny revokes)."
	if g.opts.Pairings == nil {
		return "Pairing is not available: the gateway has no pairing store.", nil
	}
	channel := req.In.Conversation.Channel
	verb, code, _ := strings.Cut(strings.TrimSpace(req.Args), " ")
	switch strings.ToLower(verb) {
	case "", "list":
		recs, err := g.opts.Pairings.Pairings(ctx, channel)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, r := range recs {
			if r.Status == core.PairingPending && !core.PairingExpired(r, g.now()) {
				fmt.Fprintf(&b, "\n%s — %s (user %s), asked %s ago", r.Code, r.UserName, r.UserID, core.HumanDuration(g.now().Sub(r.RequestedAt)))
			}
		}
		if b.Len() == 0 {
			return "No pairing requests are waiting on " + channel + ".", nil
		}
		return "Waiting for approval (/pair approve CODE):" + b.String(), nil
	case "approved":
		// The approved, with their codes: /pair deny CODE is how an admin
		// revokes one, and the code is nowhere else in chat. (Apart from
		// /pair, whose answer stays as issue 17 has it.)
		recs, err := g.opts.Pairings.Pairings(ctx, channel)
		if err != nil {
			return "", err
		}
		var ok strings.Builder
		approved := 0
		for _, r := range recs {
			if r.Status == core.PairingApproved {
				if approved++; approved <= maxApprovedListed {
					fmt.Fprintf(&ok, "\n%s — %s (user %s), approved %s ago", r.Code, r.UserName, r.UserID, core.HumanDuration(g.now().Sub(r.DecidedAt)))
				}
			}
		}
		if approved == 0 {
			return "No one is approved on " + channel + " yet.", nil
		}
		if approved > maxApprovedListed {
			fmt.Fprintf(&ok, "\n… and %d more (opentalon pair list shows them all)", approved-maxApprovedListed)
		}
		return "Approved (revoke with /pair deny CODE):" + ok.String(), nil
	case "approve", "deny":
		code = core.NormalizePairingCode(code)
		if code == "" {
			return usage, nil
		}
		approve := strings.EqualFold(verb, "approve")
		if approve {
			if expired, err := core.PairingCodeExpired(ctx, g.opts.Pairings, channel, code, g.now()); err != nil {
				return "", err
			} else if expired {
				return fmt.Sprintf("The code %s expired (a code is valid for %s); ask them to write to me again for a new one.", code, core.HumanDuration(core.PairingTTL)), nil
			}
		}
		rec, err := g.opts.Pairings.DecidePairing(ctx, channel, code, approve, req.In.UserID)
		if core.ErrorKind(err) == core.KindNotFound {
			return fmt.Sprintf("There is no pairing request with the code %s on %s.", code, channel), nil
		}
		if err != nil {
			return "", err
		}
		if !approve {
			return fmt.Sprintf("Denied %s (user %s): I will not answer them.", rec.UserName, rec.UserID), nil
		}
		g.notify(core.Inbound{Conversation: rec.Conversation, UserID: rec.UserID}, "✅ An admin approved you: I will answer your messages from now on.")
		return fmt.Sprintf("Approved %s (user %s): I answer them from now on.", rec.UserName, rec.UserID), nil
	}
	return usage, nil
}
