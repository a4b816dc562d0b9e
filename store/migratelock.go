package store

import (
	"context"
	"fmt"
	"time"
)

// migrationLockWait is how long a migration on PostgreSQL waits for the
// locks of the tables it changes before it gives up and tries again. A
// migration that waits blocks every later query on its table, so the
// replicas still running would stall behind a long transaction for as
// long as it lasts; each wait is bounded by this, and between the tries
// they go on.
const migrationLockWait = 5 * time.Second

func (db *DB) migrationLockWait() time.Duration {
	if db.lockWait > 0 {
		return db.lockWait
	}
	return migrationLockWait
}

// retryLocked runs the migration transaction apply, again after a pause
// of the lock wait each time a table's lock was not granted in time
// (lock_timeout), until it succeeds, fails otherwise, or ctx ends. name
// gives the migration that was being applied, for the log.
func (db *DB) retryLocked(ctx context.Context, apply func() error, name func() string) error {
	for try := 1; ; try++ {
		err := apply()
		if err == nil || !lockTimedOut(err) {
			return err
		}
		wait := db.migrationLockWait()
		db.log.Warn("a migration waits for a table another session holds (a long transaction? see pg_stat_activity); it lets the other replicas go on and tries again",
			"migration", name(), "database", db.name, "try", try, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up waiting for a table's lock after %d tries)", err, try)
		case <-t.C:
		}
	}
}
