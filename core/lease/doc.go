// Package lease runs singleton work — work one replica at a time does for
// the whole cluster — under a lease of a core.LeaseStore (the store's
// leases table).
//
// An Elector is one replica's candidate for any number of roles. Hold
// campaigns for a role's lease, runs the work while it holds it, and gives
// the lease up when the work ends or Hold's context is cancelled (a
// graceful shutdown: the next replica takes over in about a second, not
// after the lease's expiry):
//
//	el := lease.New(db, lease.Options{Holder: db.Holder(), TTL: 10 * time.Second})
//	go el.Hold(ctx, "telegram:mybot", func(ctx context.Context, l *lease.Lease) error {
//		offset, _ := l.Data(ctx)          // what the last holder left
//		for ctx.Err() == nil {
//			... poll, commit ...
//			if err := l.SetData(ctx, next); err != nil {
//				return err // core.ErrLeaseNotHeld: another replica took over
//			}
//		}
//		return ctx.Err()
//	})
//
// Self-fencing: the holder renews every TTL/3, each renewal bounded by
// TTL/3. The work's context is cancelled at once when a renewal fails or
// finds the lease lost (a new epoch or another holder), and in any case
// before the lease's expiry (TTL less a sixth after the last renewal
// began), so a replica cut off from the database stops before another can
// take its place. Writes of the lease's data are fenced by the epoch
// (Lease.SetData); other writes the role makes carry their own fence (the
// scheduler's compare-and-set on a schedule's next firing, the queue's
// dedupe key). Work must return soon after its context ends.
//
// Work that returns nil is done: the lease is released and Hold returns.
// Work that returns an error (or is cancelled by a lost lease) is logged,
// the lease released, and Hold campaigns again. A candidate that does not
// hold the lease tries every Options.Poll (default the smaller of 1 s and
// TTL/3). One Elector must not Hold one name twice at once.
//
// On SQLite (one process under the data directory's lock) the store gives
// every lease to its caller and Options.Sole makes the Elector take each
// lease once and never renew it: the interface is the same, the process is
// always the holder.
package lease
