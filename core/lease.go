package core

import (
	"context"
	"time"
)

// LeaseStore keeps the leases of singleton work: a role (the scheduler,
// maintenance, a Telegram poller, a Discord shard, a Slack socket slot)
// that one replica at a time does. A lease names its holder and a term,
// the epoch, bumped whenever the lease changes hands; the role's small
// state (data) passes from one holder to the next, and a write of it
// names the epoch, so a holder whose term ended changes nothing. Every
// method is safe for concurrent use by many replicas over one database.
// core/lease's Elector is how work holds a lease; only it and the status
// page call these directly.
type LeaseStore interface {
	// AcquireLease takes the lease name for holder until ttl from now,
	// or renews it when holder holds it already: one conditional write.
	// held says whether holder holds it now; epoch is the term it holds
	// it in (the same as before for a renewal in time, a new one when
	// the lease changed hands or ran out first).
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (epoch int64, held bool, err error)
	// ReleaseLease gives the lease up (a graceful shutdown), so another
	// replica takes it at once instead of after its expiry. It does
	// nothing when holder no longer holds it in epoch. The data stays for
	// the next holder.
	ReleaseLease(ctx context.Context, name, holder string, epoch int64) error
	// LeaseData is the lease's data (nil when none was ever written).
	LeaseData(ctx context.Context, name string) ([]byte, error)
	// SetLeaseData replaces the lease's data when holder holds it, in
	// epoch, and it has not run out; otherwise it changes nothing and
	// returns ErrLeaseNotHeld.
	SetLeaseData(ctx context.Context, name, holder string, epoch int64, data []byte) error
	// Leases lists every lease with its holder (for the status page).
	Leases(ctx context.Context) ([]LeaseInfo, error)
}

// LeaseInfo is one lease as the store keeps it.
type LeaseInfo struct {
	Name string `json:"name"`
	// Holder is the replica holding it ("" once released).
	Holder  string    `json:"holder"`
	Epoch   int64     `json:"epoch"`
	Expires time.Time `json:"expires"`
}

// Held says whether the lease is held at now.
func (l LeaseInfo) Held(now time.Time) bool { return l.Holder != "" && l.Expires.After(now) }

// ErrLeaseNotHeld is returned by a write fenced by a lease the writer no
// longer holds (another replica took it, or it ran out): nothing was
// changed, and the work done under that lease must stop.
var ErrLeaseNotHeld = &Error{Kind: KindUnavailable, Msg: "the lease is no longer held by this replica: another took it over, or it ran out"}

// MaxLeaseData bounds a lease's data: a few offsets and ids, not content.
const MaxLeaseData = 64 << 10

// Replica is one gateway process sharing the database, as it recorded
// itself.
type Replica struct {
	ID         string    `json:"id"`
	Host       string    `json:"host"`
	Version    string    `json:"version"`
	ConfigHash string    `json:"config_hash"`
	Started    time.Time `json:"started"`
	Heartbeat  time.Time `json:"heartbeat"`
	// Stopped is when it stopped gracefully (zero while it runs or when
	// it died).
	Stopped time.Time `json:"stopped,omitzero"`
}
