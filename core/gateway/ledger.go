package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/opentalon/opentalon/core"
)

// sealer is the part of a store that keeps short-lived credentials
// sealed (store.DB).
type sealer interface {
	KeepSealed(ctx context.Context, name, secret string, expires time.Time) error
	OpenSealed(ctx context.Context, name string) (string, bool, error)
	DropSealed(ctx context.Context, name string) error
}

var (
	_ core.ReplyLedger      = (*Gateway)(nil)
	_ core.ThreadLedger     = (*Gateway)(nil)
	_ core.CredentialKeeper = (*Gateway)(nil)
)

// errNoLedger: the store keeps no record a channel can ask.
var errNoLedger = errors.New("the store cannot tell")

// Replied implements core.ReplyLedger from the store's replies.
func (g *Gateway) Replied(ctx context.Context, conv core.ConversationKey) (bool, error) {
	l, ok := g.store.(core.ReplyLedger)
	if !ok {
		return false, errNoLedger
	}
	return l.Replied(ctx, conv)
}

// LatestThread implements core.ThreadLedger from the store's records.
func (g *Gateway) LatestThread(ctx context.Context, conv core.ConversationKey, userID string) (string, error) {
	l, ok := g.store.(core.ThreadLedger)
	if !ok {
		return "", errNoLedger
	}
	return l.LatestThread(ctx, conv, userID)
}

// KeepCredential implements core.CredentialKeeper: the secret is sealed
// in the store (never logged: errors name the credential only).
func (g *Gateway) KeepCredential(ctx context.Context, name, secret string, expires time.Time) error {
	s, ok := g.store.(sealer)
	if !ok {
		return errNoLedger
	}
	return s.KeepSealed(ctx, name, secret, expires)
}

// Credential implements core.CredentialKeeper.
func (g *Gateway) Credential(ctx context.Context, name string) (string, bool) {
	s, ok := g.store.(sealer)
	if !ok {
		return "", false
	}
	secret, ok, err := s.OpenSealed(ctx, name)
	if err != nil {
		g.log.Warn("a kept credential could not be read", "name", name, "err", err)
		return "", false
	}
	return secret, ok
}

// DropCredential implements core.CredentialKeeper.
func (g *Gateway) DropCredential(ctx context.Context, name string) {
	if s, ok := g.store.(sealer); ok {
		if err := s.DropSealed(ctx, name); err != nil {
			g.log.Warn("a used credential could not be deleted; it expires by itself", "name", name, "err", err)
		}
	}
}
