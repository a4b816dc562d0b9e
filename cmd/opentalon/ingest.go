package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/channels/discord"
	"github.com/opentalon/opentalon/channels/slack"
	"github.com/opentalon/opentalon/channels/telegram"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core/lease"
)

// ingestElector is the lease elector of the platform connections only one
// replica may hold (a Telegram poller; the webhook's registration; a Slack
// socket slot): the replica's one elector (cluster.replica_id,
// cluster.lease_ttl), so SIGTERM hands these leases over like the others.
func (a *App) ingestElector() *lease.Elector { return a.elector }

// telegramHold runs a Telegram bot's singleton work under its lease on
// PostgreSQL. It is nil on SQLite, where the data directory's lock already
// makes this process the only poller (no lease, and no write of the offset
// per batch), and for an App without a database (doctor's channels only
// check their credentials).
func (a *App) telegramHold() telegram.HoldFunc {
	if a.db == nil || a.cfg.State.Driver != config.DriverPostgres {
		return nil
	}
	return func(ctx context.Context, name string, work func(context.Context, telegram.Lease) error) error {
		el := a.ingestElector()
		return el.Hold(ctx, name, func(ctx context.Context, l *lease.Lease) error { return work(ctx, l) })
	}
}

// slackHoldSlot runs a Slack Socket Mode connection under one of the
// app's connection slots on PostgreSQL (nil on SQLite and without a
// database, as telegramHold): the first free slot's lease is taken (one
// conditional write each, in order), then held like any lease; with every
// slot taken the replica looks again every second.
func (a *App) slackHoldSlot() slack.HoldSlotFunc {
	if a.db == nil || a.cfg.State.Driver != config.DriverPostgres {
		return nil
	}
	return func(ctx context.Context, prefix string, slots int, work func(context.Context) error) error {
		el := a.ingestElector()
		for ctx.Err() == nil {
			for k := 0; k < slots; k++ {
				name := prefix + strconv.Itoa(k)
				_, held, err := a.db.AcquireLease(ctx, name, el.Holder(), el.TTL())
				if err != nil || !held {
					continue
				}
				return el.Hold(ctx, name, func(ctx context.Context, _ *lease.Lease) error { return work(ctx) })
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return nil
	}
}

// discordHoldShard runs a Discord gateway shard under its lease on
// PostgreSQL (nil on SQLite and without a database, as telegramHold:
// there the one process runs every shard). Every replica campaigns for
// every shard, so shard 0 (the one DMs arrive on) and the others always
// find a holder while one replica lives; a replica already running k of
// the app's shards waits k seconds before each try for another, so a
// replica running fewer takes a free shard first and the shards spread
// over the replicas as they start.
func (a *App) discordHoldShard() discord.HoldShardFunc {
	if a.db == nil || a.cfg.State.Driver != config.DriverPostgres {
		return nil
	}
	return func(ctx context.Context, name string, work func(context.Context, discord.ShardLease) error) error {
		el := a.ingestElector()
		prefix := name[:strings.LastIndex(name, ":")+1]
		for ctx.Err() == nil {
			held := 0
			for _, h := range el.HeldNames() {
				if strings.HasPrefix(h, prefix) {
					held++
				}
			}
			if held > 0 && !strings.HasSuffix(name, ":0") {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Duration(held) * time.Second):
				}
			}
			_, ok, err := a.db.AcquireLease(ctx, name, el.Holder(), el.TTL())
			if err == nil && ok {
				return el.Hold(ctx, name, func(ctx context.Context, l *lease.Lease) error { return work(ctx, l) })
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return nil
	}
}
