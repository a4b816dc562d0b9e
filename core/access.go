package core

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AccessMode says who may talk to the bot on a channel.
type AccessMode string

// Access modes (channels.<x>.access). Admins may always talk.
const (
	// AccessOpen lets everyone the platform adapter admits talk.
	AccessOpen AccessMode = "open"
	// AccessAllowlist lets only the listed users and the admins talk.
	AccessAllowlist AccessMode = "allowlist"
	// AccessPairing gives an unknown user a short code; their messages
	// are answered once an admin approved the code.
	AccessPairing AccessMode = "pairing"
)

// AccessPolicy is one channel's access rule. A channel without a policy
// is open and has no admins.
type AccessPolicy struct {
	Mode AccessMode
	// Admins are the user ids that may use admin-only commands; they may
	// always talk to the bot.
	Admins []string
	// Users are, in pairing mode, the user ids approved from the start.
	// In allowlist mode they are the allowlist the platform adapter
	// applied itself (it may hold usernames the gateway cannot check):
	// when it is empty, only the admins may talk.
	Users []string
	// Operator makes every user of the channel an admin: the console,
	// whose user is whoever runs the process.
	Operator bool
}

// Pairing statuses.
const (
	PairingPending  = "pending"
	PairingApproved = "approved"
	PairingDenied   = "denied"
)

// Pairing is one user's request to talk to the bot on a channel, and the
// admin's decision on it.
type Pairing struct {
	Channel  string
	UserID   string
	UserName string
	// Conversation is where the user asked (where an approval is told).
	Conversation ConversationKey
	// Code is what the user was given and an admin approves.
	Code        string
	Status      string
	RequestedAt time.Time
	DecidedAt   time.Time
	// DecidedBy is the admin's user id, or "cli".
	DecidedBy string
}

// ErrPairingCodeTaken is returned by RequestPairing when another request
// holds the code; the caller draws another.
var ErrPairingCodeTaken = errors.New("pairing code already in use")

// PairingTTL is how long a pairing code may be approved. A user whose code
// expired gets a new one when they write again.
const PairingTTL = 24 * time.Hour

// MaxPendingPairings bounds the pairing requests waiting on one channel:
// past it, an unknown user gets no code, and adds no row, until some are
// decided or expire.
const MaxPendingPairings = 100

// PairingExpired reports whether a pairing is a request whose code can no
// longer be approved.
func PairingExpired(p Pairing, now time.Time) bool {
	return p.Status == PairingPending && now.Sub(p.RequestedAt) > PairingTTL
}

// PairingStore keeps pairing requests and decisions (store.DB). Safe for
// concurrent use.
type PairingStore interface {
	// Pairing returns a user's record on a channel, nil when there is none.
	Pairing(ctx context.Context, channel, userID string) (*Pairing, error)
	// RequestPairing stores p as pending unless the user already has a
	// record, and returns the record as stored. It returns
	// ErrPairingCodeTaken when p.Code belongs to another user.
	RequestPairing(ctx context.Context, p Pairing) (Pairing, error)
	// DecidePairing approves or denies the record with code (on channel;
	// "" = any channel) and returns it as decided. An unknown code is a
	// KindNotFound error.
	DecidePairing(ctx context.Context, channel, code string, approve bool, by string) (Pairing, error)
	// Pairings lists the records of a channel ("" = every channel), the
	// pending ones first, newest first within a status.
	Pairings(ctx context.Context, channel string) ([]Pairing, error)
	// ExpirePairings removes the pending requests made before before
	// (decided ones stay) and returns how many.
	ExpirePairings(ctx context.Context, before time.Time) (int, error)
}

// pairingAlphabet has no 0/O or 1/I/L, so a code read aloud is typed right.
const pairingAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// NewPairingCode draws an 8-character pairing code.
func NewPairingCode() string {
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = pairingAlphabet[int(b[i])%len(pairingAlphabet)]
	}
	return string(b)
}

// NormalizePairingCode upper-cases a code as typed and drops spaces and
// dashes.
func NormalizePairingCode(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, strings.ToUpper(strings.TrimSpace(s)))
}

// isAdmin reports whether in's sender is an admin of its channel (by
// the config; see also the Authorizer's AuthAdmin). A message no platform
// delivered has no admin sender.
func (g *Gateway) isAdmin(in Inbound) bool {
	if in.Origin != "" {
		return false
	}
	p, ok := g.opts.Access[in.Conversation.Channel]
	return ok && (p.Operator || in.UserID != "" && slices.Contains(p.Admins, in.UserID))
}

// AuthDecision is an auth provider's answer about one user.
type AuthDecision int

// Auth decisions. The zero value denies.
const (
	AuthDeny AuthDecision = iota
	AuthAllow
	// AuthAdmin allows and makes the user an admin of the channel.
	AuthAdmin
)

func (d AuthDecision) String() string {
	switch d {
	case AuthAllow:
		return "allow"
	case AuthAdmin:
		return "admin"
	}
	return "deny"
}

// Authorizer is an auth provider (a plugin implementing Authorize): it is
// asked about each user the channel's own access rule admitted. An error
// refuses the user (fail closed). Implementations cache their answers;
// safe for concurrent use.
type Authorizer interface {
	Authorize(ctx context.Context, channel, chat, user string) (AuthDecision, error)
}

// authorizes reports whether the Authorizer applies to in.
func (g *Gateway) authorizes(in Inbound) bool {
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
func (g *Gateway) authorized(ctx context.Context, in Inbound) (ok, admin bool) {
	d, err := g.opts.Authorizer.Authorize(ctx, in.Conversation.Channel, in.Conversation.Chat, in.UserID)
	if err != nil {
		g.log.Warn("the auth provider failed; the user is refused (fail closed)", "channel", in.Conversation.Channel, "user", in.UserID, "err", err)
		return false, false
	}
	return d == AuthAllow || d == AuthAdmin, d == AuthAdmin
}

// admitted reports whether in's sender may talk to the bot on its
// channel; for an unknown user in pairing mode it also returns their
// pairing record (nil when they have none yet).
func (g *Gateway) admitted(ctx context.Context, in Inbound) (bool, *Pairing, error) {
	ok, rec, err := g.admittedByChannel(ctx, in)
	if err != nil || !ok || !g.authorizes(in) || g.isAdmin(in) {
		return ok, rec, err
	}
	// The channel admitted the user; the auth provider has the last word.
	ok, _ = g.authorized(ctx, in)
	return ok, nil, nil
}

var _ AccessChecker = (*Gateway)(nil)

// MayTalk implements AccessChecker: the channel's access rule and the
// auth provider, as at intake; a failure to decide refuses. At intake the
// platform adapter has applied allow_users before; nobody has here, so an
// id not on a non-empty list is refused too, unless the list holds names
// (which only the adapter can match to a user).
func (g *Gateway) MayTalk(ctx context.Context, in Inbound) bool {
	ok, _, err := g.admitted(ctx, in)
	if err != nil || !ok {
		return false
	}
	p := g.opts.Access[in.Conversation.Channel]
	if p.Mode == AccessPairing || p.Operator || len(p.Users) == 0 || g.isAdmin(in) {
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
func (g *Gateway) admittedByChannel(ctx context.Context, in Inbound) (bool, *Pairing, error) {
	channel := in.Conversation.Channel
	p, ok := g.opts.Access[channel]
	if !ok || p.Mode == AccessOpen || p.Mode == "" || g.isAdmin(in) {
		return true, nil, nil
	}
	switch p.Mode {
	case AccessAllowlist:
		return len(p.Users) > 0, nil, nil
	case AccessPairing:
		if in.UserID == "" {
			return false, nil, nil
		}
		if slices.Contains(p.Users, in.UserID) {
			return true, nil, nil
		}
		if g.opts.Pairings == nil {
			return false, nil, Errorf(KindInvalid, "channel %s pairs users but the gateway has no pairing store", channel)
		}
		rec, err := g.opts.Pairings.Pairing(ctx, channel, in.UserID)
		if err != nil {
			return false, nil, fmt.Errorf("look up the pairing of %s user %s: %w", channel, in.UserID, err)
		}
		return rec != nil && rec.Status == PairingApproved, rec, nil
	}
	return false, nil, nil
}

// admit decides at intake whether a message may go on: nothing from a
// user who may not talk to the bot is queued, so nothing of it reaches
// the LLM. An unknown user in pairing mode is given a pairing code (at
// most one notice a minute); everyone else refused is ignored.
func (g *Gateway) admit(ctx context.Context, in Inbound) (bool, error) {
	ok, rec, err := g.admittedByChannel(ctx, in)
	if err != nil {
		return false, err
	}
	if ok {
		if !g.authorizes(in) || g.isAdmin(in) {
			return true, nil
		}
		if ok, _ = g.authorized(ctx, in); !ok {
			g.obs.Finished(in.Conversation.Channel, EventMessage, OutcomeRefused)
			g.log.Debug("message from a user the auth provider refused ignored", "channel", in.Conversation.Channel)
		}
		return ok, nil
	}
	g.obs.Finished(in.Conversation.Channel, EventMessage, OutcomeRefused)
	if g.opts.Access[in.Conversation.Channel].Mode != AccessPairing || in.UserID == "" {
		g.log.Debug("message from a user not allowed on this channel ignored", "channel", in.Conversation.Channel, "access", g.opts.Access[in.Conversation.Channel].Mode)
		return false, nil
	}
	if rec != nil && PairingExpired(*rec, g.now()) {
		// Its code can no longer be approved: it goes, with every other
		// expired request, and the user gets a new one.
		if _, err := g.opts.Pairings.ExpirePairings(ctx, g.now().Add(-PairingTTL)); err != nil {
			return false, fmt.Errorf("expire pairing requests: %w", err)
		}
		rec = nil
	}
	if rec == nil {
		all, err := g.opts.Pairings.Pairings(ctx, in.Conversation.Channel)
		if err != nil {
			return false, fmt.Errorf("count pairing requests: %w", err)
		}
		waiting := 0
		for _, r := range all {
			if r.Status == PairingPending && !PairingExpired(r, g.now()) {
				waiting++
			}
		}
		if waiting >= MaxPendingPairings {
			if g.noticeDue("pairing-full:" + in.Conversation.Channel) {
				g.log.Warn("too many pairing requests are waiting on this channel: an unknown user got no code; approve or deny some (/pair, opentalon pair list)",
					"channel", in.Conversation.Channel, "waiting", waiting)
			}
			return false, nil
		}
		p := Pairing{Channel: in.Conversation.Channel, UserID: in.UserID, UserName: in.UserName,
			Conversation: in.Conversation, Status: PairingPending, RequestedAt: g.now()}
		for try := 0; ; try++ {
			p.Code = NewPairingCode()
			got, err := g.opts.Pairings.RequestPairing(ctx, p)
			if errors.Is(err, ErrPairingCodeTaken) && try < 3 {
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
	}
	if rec.Status != PairingPending {
		return false, nil // denied: nothing is sent
	}
	if g.noticeDue("pair:" + in.Conversation.Channel + ":" + in.UserID) {
		g.notify(in, fmt.Sprintf("🔒 I answer only people an admin of this bot has approved. Your pairing code is %s: ask an admin to send /pair approve %s.", rec.Code, rec.Code))
	}
	return false, nil
}

// pairingLister lists pairing records (PairingStore.Pairings).
type pairingLister interface {
	Pairings(ctx context.Context, channel string) ([]Pairing, error)
}

// pairingCodeExpired reports whether code is a request on channel ("" =
// any) whose code expired.
func pairingCodeExpired(ctx context.Context, ps pairingLister, channel, code string, now time.Time) (bool, error) {
	recs, err := ps.Pairings(ctx, channel)
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		if r.Code == code {
			return PairingExpired(r, now), nil
		}
	}
	return false, nil
}

// PairingCodeExpired is pairingCodeExpired for `opentalon pair approve`.
func PairingCodeExpired(ctx context.Context, ps pairingLister, code string, now time.Time) (bool, error) {
	return pairingCodeExpired(ctx, ps, "", NormalizePairingCode(code), now)
}

// cmdPair is /pair: list, approve and deny the pairing requests of the
// admin's channel.
func (g *Gateway) cmdPair(ctx context.Context, req CommandRequest) (string, error) {
	const usage = "Usage: /pair to list the pending requests, /pair approve CODE, /pair deny CODE."
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
			if r.Status == PairingPending && !PairingExpired(r, g.now()) {
				fmt.Fprintf(&b, "\n%s — %s (user %s), asked %s ago", r.Code, r.UserName, r.UserID, g.now().Sub(r.RequestedAt).Round(time.Second))
			}
		}
		if b.Len() == 0 {
			return "No pairing requests are waiting on " + channel + ".", nil
		}
		return "Waiting for approval (/pair approve CODE):" + b.String(), nil
	case "approve", "deny":
		code = NormalizePairingCode(code)
		if code == "" {
			return usage, nil
		}
		approve := strings.EqualFold(verb, "approve")
		if approve {
			if expired, err := pairingCodeExpired(ctx, g.opts.Pairings, channel, code, g.now()); err != nil {
				return "", err
			} else if expired {
				return fmt.Sprintf("The code %s expired (a code is valid for %s); ask them to write to me again for a new one.", code, PairingTTL), nil
			}
		}
		rec, err := g.opts.Pairings.DecidePairing(ctx, channel, code, approve, req.In.UserID)
		if ErrorKind(err) == KindNotFound {
			return fmt.Sprintf("There is no pairing request with the code %s on %s.", code, channel), nil
		}
		if err != nil {
			return "", err
		}
		if !approve {
			return fmt.Sprintf("Denied %s (user %s): I will not answer them.", rec.UserName, rec.UserID), nil
		}
		g.notify(Inbound{Conversation: rec.Conversation, UserID: rec.UserID}, "✅ An admin approved you: I will answer your messages from now on.")
		return fmt.Sprintf("Approved %s (user %s): I answer them from now on.", rec.UserName, rec.UserID), nil
	}
	return usage, nil
}
