package main

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"time"

	"github.com/opentalon/opentalon/channels/console"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/clock"
	"github.com/opentalon/opentalon/core/lease"
	"github.com/opentalon/opentalon/metrics/status"
	"github.com/opentalon/opentalon/store"
)

// The replicas of one database (state.driver: postgres), wired here and
// decided in their packages: singleton work runs under core/lease leases
// (the scheduler's own in core/schedule; "maintenance" below), operator
// notices are claimed once for the cluster (notify.Options.Claim), and
// each replica records itself and its heartbeat for the status page.
// On SQLite the one process holds every lease (lease.Options.Sole).

// maintenanceLease is the lease of the cluster's housekeeping: pruning
// finished queue rows, session expiry, the media sweep, the cluster's
// own notices and replicas.
const maintenanceLease = "maintenance"

// clustered says the database is shared by replicas.
func clustered(cfg *config.Config) bool { return cfg.State.Driver == config.DriverPostgres }

// consoleReplica is the console's thread on a database replicas share:
// this replica's name (cluster.replica_id, else the host name), so each
// terminal has a conversation of its own, console:local:<name>, that
// only its replica claims (localConversation). "" on SQLite: one
// process, the conversation console:local.
func consoleReplica(cfg *config.Config) string {
	if !clustered(cfg) {
		return ""
	}
	if cfg.Cluster.ReplicaID != "" {
		return cfg.Cluster.ReplicaID
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return host
	}
	return "replica"
}

// consoleShared is the console conversation of a single machine, which
// state migrate gives to that machine's console among replicas.
const consoleShared = console.Name + ":" + console.DefaultChat

// consoleConversation is the conversation of this process's console.
func consoleConversation(cfg *config.Config) string {
	return core.ConversationKey{Channel: console.Name, Chat: console.DefaultChat, Thread: consoleReplica(cfg)}.String()
}

// localConversation is what the store's claims leave to one replica on a
// database replicas share: of the console's conversations, a replica with
// a console claims its own and those without a replica's thread, which
// the consoles share (console:local or another chat a schedule names),
// one without a console none. Unset on SQLite.
func localConversation(cfg *config.Config) store.LocalConversation {
	if !clustered(cfg) {
		return store.LocalConversation{}
	}
	l := store.LocalConversation{Channel: console.Name}
	if cfg.Channels.Console.Enabled {
		l.Conversation = consoleConversation(cfg)
		l.Shared = true
	}
	return l
}

// replicaChannels names the channels this replica runs, which its
// claims keep to (store.Options.Channels): replicas whose configs differ
// leave one another's channels alone. Nil on SQLite, where the one
// process claims everything.
func replicaChannels(cfg *config.Config) []string {
	if !clustered(cfg) {
		return nil
	}
	names := []string{}
	for _, s := range cfg.Channels.Sections() {
		if s.Enabled {
			names = append(names, s.Name)
		}
	}
	return names
}

// buildElector builds this replica's lease elector over the store.
func (a *App) buildElector() {
	a.elector = lease.New(a.db, lease.Options{Holder: a.db.Holder(), TTL: a.cfg.Cluster.LeaseTTL.D(), Sole: !clustered(a.cfg), Logger: a.log})
}

// hold runs work under the lease name until ctx ends, in the background;
// Run waits for every hold (and so for its release) before it returns.
func (a *App) hold(ctx context.Context, name string, work func(ctx context.Context) error) {
	a.holds.Add(1)
	go func() {
		defer a.holds.Done()
		if err := a.elector.Hold(ctx, name, func(ctx context.Context, _ *lease.Lease) error { return work(ctx) }); err != nil && ctx.Err() == nil {
			a.log.Error("singleton work stopped", "lease", name, "err", err)
		}
	}()
}

// holdSync is hold's shape for core/schedule.Options.Hold.
func (a *App) holdSync(ctx context.Context, name string, work func(ctx context.Context) error) error {
	return a.elector.Hold(ctx, name, func(ctx context.Context, _ *lease.Lease) error { return work(ctx) })
}

// startMaintenance runs the housekeeping on the replica holding the
// maintenance lease, from startSettle after the channels start (its
// first sweeps are writes no first message needs), and settles the
// store (store.DB.Settle: a new database's dates) then.
func (a *App) startMaintenance(ctx context.Context) {
	a.holds.Add(1)
	go func() {
		defer a.holds.Done()
		if !afterStart(ctx) {
			return
		}
		if err := a.db.Settle(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("settle the database after the start", "err", err)
		}
		a.maintain(ctx)
	}()
}

// maintain runs the housekeeping under the maintenance lease.
func (a *App) maintain(ctx context.Context) {
	a.hold(ctx, maintenanceLease, func(ctx context.Context) error {
		ttl := a.cfg.State.SessionTTL.D()
		stops := []func(){
			startSessionSweeper(ctx, a.db, ttl, sweepEvery(ttl), a.log),
			startMediaSweeper(ctx, a.db, a.cfg.Media.Retention.D(), a.log),
		}
		if clustered(a.cfg) {
			stops = append(stops, runEvery(ctx, time.Hour, true, func(ctx context.Context) {
				if err := a.db.PruneCluster(ctx, a.opts.Now().Add(-7*24*time.Hour)); err != nil && ctx.Err() == nil {
					a.log.Warn("prune the cluster's notices and replicas", "err", err)
				}
			}))
		}
		if a.pruneEvery > 0 {
			stops = append(stops, startPrunerCtx(ctx, a.db, a.pruneEvery, a.log))
		}
		<-ctx.Done()
		for _, stop := range stops {
			stop()
		}
		return ctx.Err()
	})
}

// configHash identifies the effective config (secrets redacted) so the
// status page can warn when replicas run different ones. What is each
// replica's own — its name, its data directory, the addresses it listens
// on (the status server, Telegram's webhook, Slack's events) and its
// console, which one process has — is left out.
//
// The channels' tokens print as "***", yet replicas with different tokens
// are different bots taking one queue's messages. They count only under
// state.seal_key: the hash is then an HMAC keyed by a key derived from
// it, which the replicas share and the database, the log and the status
// page never hold. A plain hash over the config and the tokens would be
// published in all three, and anyone who has the config file without its
// secrets (a repository, `opentalon config check`) could test guesses of
// a token against it offline, as fast as SHA-256 runs: a short or
// partly known token would fall. Without state.seal_key the tokens stay
// out (and are compared by hand, as the start warning says). The DSN
// stays out too (it prints as "***"): replicas may reach one database by
// different addresses.
func configHash(cfg *config.Config) string {
	c := *cfg
	c.Cluster.ReplicaID, c.State.DataDir, c.Server.Listen = "", "", ""
	c.Channels.Telegram.Webhook.Listen, c.Channels.Slack.Events.Listen = "", ""
	c.Channels.Console = config.Console{}
	redacted := []byte(c.Redacted())
	if !c.State.SealKey.IsSet() {
		h := sha256.Sum256(redacted)
		return hex.EncodeToString(h[:6])
	}
	key, err := hkdf.Key(sha256.New, []byte(c.State.SealKey.Value()), nil, "opentalon config hash v1", sha256.Size)
	if err != nil {
		h := sha256.Sum256(redacted) // only for a length SHA-256 cannot give
		return hex.EncodeToString(h[:6])
	}
	h := hmac.New(sha256.New, key)
	h.Write(redacted)
	for _, tok := range []core.Secret{c.Channels.Telegram.Token, c.Channels.Slack.BotToken, c.Channels.Slack.AppToken, c.Channels.Discord.Token} {
		// Each with its length, so no two sets of tokens run together.
		h.Write([]byte{byte(len(tok.Value()) >> 8), byte(len(tok.Value()))})
		h.Write([]byte(tok.Value()))
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// startReplica records this replica and its heartbeat until ctx ends,
// then its graceful stop. On SQLite there is one process and no record:
// nothing is written at start or every few seconds while idle.
func (a *App) startReplica(ctx context.Context) {
	if !clustered(a.cfg) {
		return
	}
	host, _ := os.Hostname()
	now := a.opts.Now()
	r := core.Replica{ID: a.db.Holder(), Host: host, Version: Version, ConfigHash: configHash(a.cfg), Started: now, Heartbeat: now}
	if err := a.db.RegisterReplica(ctx, r); err != nil {
		a.log.Warn("record this replica", "err", err)
	}
	if others, err := a.db.Replicas(ctx, r.Started.Add(-3*a.cfg.Cluster.Heartbeat.D())); err != nil {
		a.log.Warn("read the other replicas", "err", err)
	} else {
		a.warnSharedConsole(others, r)
		a.warnOtherConfigs(others, r)
	}
	a.holds.Add(1)
	go func() {
		defer a.holds.Done()
		t := time.NewTicker(a.cfg.Cluster.Heartbeat.D())
		defer t.Stop()
		var failing clock.Repeat // a database that is down fails every beat
		for {
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				if err := a.db.ReplicaStopped(sctx, r.ID, a.opts.Now()); err != nil {
					a.log.Warn("record this replica's stop", "err", err)
				}
				cancel()
				return
			case <-t.C:
				now := a.opts.Now()
				if err := a.db.ReplicaHeartbeat(ctx, r.ID, now); err != nil && ctx.Err() == nil {
					if report, since, n := failing.Failed(now); report {
						a.log.Warn("replica heartbeat", "failing_since", since, "failures_not_logged", n, "err", err)
					}
				} else if err == nil {
					failing.Recovered()
				}
			}
		}
	}()
}

// checkReplicaID refuses to start under a cluster.replica_id a running
// replica already uses: the leases are held by that name, so two
// processes with one name would both hold the scheduler, maintenance,
// the Telegram poller and the Discord shards. A record of the name heard
// from lately and not stopped is either such a replica or a predecessor
// killed moments ago (a restart under the same name); its heartbeat
// tells them apart, so this waits until two heartbeats after the last one
// recorded for it to move.
func (a *App) checkReplicaID(ctx context.Context) error {
	id := a.cfg.Cluster.ReplicaID
	if !clustered(a.cfg) || id == "" {
		return nil
	}
	beat := a.cfg.Cluster.Heartbeat.D()
	find := func() (core.Replica, bool) {
		rs, err := a.db.Replicas(ctx, a.opts.Now().Add(-2*beat))
		if err != nil {
			a.log.Warn("read the replicas", "err", err)
			return core.Replica{}, false
		}
		for _, r := range rs {
			if r.ID == id && r.Stopped.IsZero() {
				return r, true
			}
		}
		return core.Replica{}, false
	}
	seen, ok := find()
	if !ok {
		return nil
	}
	a.log.Info("a replica named like this one (cluster.replica_id) was heard from lately and did not stop: waiting for its heartbeat to tell a running replica from a killed predecessor",
		"replica", id, "host", seen.Host, "heartbeat_age", a.opts.Now().Sub(seen.Heartbeat).Round(time.Millisecond).String())
	// A running replica beats again within a heartbeat (two, to allow
	// for a slow write) of its last one.
	deadline := time.NewTimer(seen.Heartbeat.Add(2 * beat).Sub(a.opts.Now()))
	defer deadline.Stop()
	tick := time.NewTicker(beat / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
			if r, ok := find(); ok && r.Heartbeat.After(seen.Heartbeat) {
				return core.Errorf(core.KindInvalid, "cluster.replica_id %q is in use by a running replica (on host %s, started %s): two replicas with one name would share its leases and both run the scheduler, the Telegram poller and the other work one replica does at a time; give each replica its own cluster.replica_id, or leave it unset (a name new at every start)",
					id, r.Host, r.Started.UTC().Format(time.RFC3339))
			}
		}
	}
}

// warnSharedConsole warns when this replica's console is named after its
// host (no cluster.replica_id) and another replica runs on the same host:
// the two terminals share one conversation, and each may answer the
// other's lines.
func (a *App) warnSharedConsole(rs []core.Replica, me core.Replica) {
	if !a.cfg.Channels.Console.Enabled || a.cfg.Cluster.ReplicaID != "" {
		return
	}
	for _, r := range rs {
		if r.ID != me.ID && r.Host == me.Host && r.Stopped.IsZero() {
			a.log.Warn("another replica runs on this host: the consoles of replicas without cluster.replica_id are named after their host, so their terminals share one conversation and may answer each other's lines; give each replica that reads a terminal its own cluster.replica_id",
				"host", me.Host, "other_replica", r.ID, "console", consoleConversation(a.cfg))
			return
		}
	}
}

// warnOtherConfigs says, at start, when running replicas of this bot
// (rs, heard from lately) run another config or release than this one
// (me). The status page shows it too, but an operator deploying a
// replica reads its log: replicas take one queue's messages, so one with
// another model, another limit or another channel token answers some of
// the bot's messages differently, or through another bot. Another
// release is expected during a rolling deploy and only noted; its config
// hash is not compared, since a release prints (and hashes) the same
// file its own way.
func (a *App) warnOtherConfigs(rs []core.Replica, me core.Replica) {
	var configs, versions []string
	for _, r := range rs {
		if r.ID == me.ID || !r.Stopped.IsZero() {
			continue
		}
		if r.Version != me.Version {
			// The hash is over the config as a release prints it: under
			// another release the same file may hash differently (a key
			// added with its default), so it is not compared.
			versions = append(versions, r.ID+" ("+r.Version+")")
			continue
		}
		if r.ConfigHash != me.ConfigHash {
			configs = append(configs, r.ID+" (config "+r.ConfigHash+", host "+r.Host+")")
		}
	}
	if len(configs) > 0 {
		a.log.Warn("this replica runs another config than the running replicas of this bot: they share one queue, so each message is answered by whichever replica takes it, with that replica's models, limits and channel tokens; deploy one config to every replica (compare `opentalon config check` on each; tokens print as ***: they count here only when state.seal_key is set, so without it compare channels.*.token, bot_token and app_token by hand)",
			"config", me.ConfigHash, "others", strings.Join(configs, ", "))
	}
	if len(versions) > 0 {
		a.log.Info("replicas of this bot run other releases (expected during a rolling deploy; their configs are compared once they run this one)", "version", me.Version, "others", strings.Join(versions, ", "))
	}
}

// sharedEvery is how often a replica re-reads the router's state other
// replicas write (cooldowns, the probes' spend): every second on a shared
// database, never on SQLite.
func sharedEvery(cfg *config.Config) time.Duration {
	if clustered(cfg) {
		return time.Second
	}
	return 0
}

// statusCluster is the status page's replicas (heard from within three
// heartbeats, or stopped in the last hour) and leases.
func (a *App) statusCluster(ctx context.Context) (status.Cluster, error) {
	now := a.opts.Now()
	rs, err := a.db.Replicas(ctx, now.Add(-max(3*a.cfg.Cluster.Heartbeat.D(), time.Hour)))
	if err != nil {
		return status.Cluster{}, err
	}
	live := rs[:0]
	for _, r := range rs {
		if !r.Stopped.IsZero() || now.Sub(r.Heartbeat) <= 3*a.cfg.Cluster.Heartbeat.D() {
			live = append(live, r)
		}
	}
	ls, err := a.db.Leases(ctx)
	if err != nil {
		return status.Cluster{}, err
	}
	return status.ClusterOf(a.db.Holder(), live, ls, now), nil
}

// holdsMaintenance says this replica holds the maintenance lease (and so
// exports the metrics read from the database).
func (a *App) holdsMaintenance() bool {
	_, ok := a.elector.Held()[maintenanceLease]
	return ok
}
