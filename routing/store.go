package routing

import (
	"context"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// Store is the persistence the router needs; store.DB implements it and
// MemStore is the in-memory version for tests and the simulator. All
// methods are safe for concurrent use.
type Store interface {
	// AddSignal appends a quality signal and returns its id.
	AddSignal(ctx context.Context, s core.Signal) (int64, error)
	// UpdateAffinity replaces the (task, model) row by fn(current) in one
	// transaction; a missing row is passed as its zero value with Task
	// and Model set.
	UpdateAffinity(ctx context.Context, task, model string, fn func(core.Affinity) core.Affinity) error
	// Affinities returns every row.
	Affinities(ctx context.Context) ([]core.Affinity, error)
	// ProfileStates returns the state of every profile seen so far.
	ProfileStates(ctx context.Context) ([]core.ProfileState, error)
	// SaveProfileState upserts one profile's state.
	SaveProfileState(ctx context.Context, st core.ProfileState) error
	// AddUsage appends one call to the cost ledger.
	AddUsage(ctx context.Context, u core.UsageRecord) error
	// SpentSince sums cost_usd since a time, for one conversation key or
	// for all when conversation is "".
	SpentSince(ctx context.Context, since time.Time, conversation string) (float64, error)
}

var _ Store = (*store.DB)(nil)
var _ Conversations = (*store.DB)(nil)
var _ Pinner = (*store.DB)(nil)
var _ SettingsStore = (*store.DB)(nil)
