package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// A new SQLite database is ready for the first message before all of it
// is on the disk: what no message needs waits, off the start's path.
// On a disk whose syncs take milliseconds, the four syncs a new data
// directory cost before the first poll were most of the start; one is
// left (the image's content, before it gets its name).

// nameSync makes a new database's name durable in its directory while
// the start goes on: the first flush waits for it (an accepted message
// is durable only in a database that is).
type nameSync struct {
	done chan struct{}
}

// startNameSync syncs dir in the background with sync (syncDirectory
// when nil). A failure is logged: the database works, and only a power
// cut before the next sync of the directory could lose it.
func startNameSync(dir string, sync func(string) error, log *slog.Logger) *nameSync {
	if sync == nil {
		sync = syncDirectory
	}
	n := &nameSync{done: make(chan struct{})}
	go func() {
		defer close(n.done)
		if err := sync(dir); err != nil {
			log.Warn("the new database may not survive a power cut until its directory is synced", "dir", dir, "err", err)
		}
	}()
	return n
}

// wait returns once the sync has ended (at once for nil).
func (n *nameSync) wait() {
	if n != nil {
		<-n.done
	}
}

// syncDirectory flushes dir's entries to the disk.
func syncDirectory(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Settle does what opening the database left for after the start: it
// dates the migrations of a database made from the schema's image (they
// are recorded at time 0 in it). That is a write, and a new database's
// first write creates its log with two syncs, which no first message
// needs. The gateway calls it once its channels are up; Close calls it
// when nothing did. A database whose migrations are dated costs nothing.
func (db *DB) Settle(ctx context.Context) error {
	if !db.undated.Load() {
		return nil
	}
	if _, err := db.w.ExecContext(ctx, `UPDATE schema_migrations SET applied_at = ? WHERE applied_at = 0`, db.ms()); err != nil {
		return fmt.Errorf("date the migrations of database %s: %w", db.name, err)
	}
	db.undated.Store(false)
	return nil
}
