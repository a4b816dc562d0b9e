package core

import (
	"context"
	"crypto/rand"
	"errors"
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

// PairingLister lists pairing records (PairingStore.Pairings).
type PairingLister interface {
	Pairings(ctx context.Context, channel string) ([]Pairing, error)
}

// PairingCodeExpired reports whether code is a request on channel ("" =
// any channel) whose code expired.
func PairingCodeExpired(ctx context.Context, ps PairingLister, channel, code string, now time.Time) (bool, error) {
	recs, err := ps.Pairings(ctx, channel)
	if err != nil {
		return false, err
	}
	code = NormalizePairingCode(code)
	for _, r := range recs {
		if r.Code == code {
			return PairingExpired(r, now), nil
		}
	}
	return false, nil
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
