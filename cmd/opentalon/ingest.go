package main

import (
	"context"

	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core/lease"
)

// ingestElector is the lease elector of the platform connections only one
// replica may hold (a Telegram poller; the webhook's registration): over
// the database on PostgreSQL; on SQLite the one process is always the
// holder (lease.Options.Sole). Built once, on first use.
func (a *App) ingestElector() *lease.Elector {
	a.ingestOnce.Do(func() {
		a.ingest = lease.New(a.db, lease.Options{
			Holder: a.db.Holder(),
			Sole:   a.cfg.State.Driver != config.DriverPostgres,
			Logger: a.log.With("component", "lease"),
		})
	})
	return a.ingest
}

// telegramHold runs a Telegram bot's singleton work under its lease.
func (a *App) telegramHold() telegram.HoldFunc {
	el := a.ingestElector()
	return func(ctx context.Context, name string, work func(context.Context, telegram.Lease) error) error {
		return el.Hold(ctx, name, func(ctx context.Context, l *lease.Lease) error { return work(ctx, l) })
	}
}
