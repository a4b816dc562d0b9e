package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/bwmarrin/discordgo"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// ShardLease is the lease a shard's gateway session runs under.
type ShardLease interface {
	// Data is what the last holder left (nil at first).
	Data(ctx context.Context) ([]byte, error)
	// SetData replaces it; an error when the lease is no longer held.
	SetData(ctx context.Context, data []byte) error
}

// HoldShardFunc runs work while this replica holds the lease name,
// campaigning for it while another replica holds it, until ctx ends.
// work's context ends when the lease is lost; work returns an error to
// campaign again.
type HoldShardFunc func(ctx context.Context, name string, work func(ctx context.Context, l ShardLease) error) error

// ShardLeaseName is the lease of shard n of the application appID.
func ShardLeaseName(appID string, n int) string {
	return "discord:" + appID + ":shard:" + strconv.Itoa(n)
}

// closeHandover is the close code of a session handed to another replica:
// any code but 1000 and 1001 keeps a Discord session resumable.
const closeHandover = 4000

// identifyEvery is Discord's identify rate: one per 5 s per bucket.
const identifyEvery = 5 * time.Second

// saveEvery is how often a leased shard writes its session's progress to
// the lease's data.
const saveEvery = time.Second

// shardState is where a shard's session stands: what a successor needs
// to resume it. Seq is the last event the sink has taken (not merely
// read), so a resume replays what was read but not committed.
type shardState struct {
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
	ResumeURL string `json:"resume_gateway_url,omitempty"`
}

// shard is one gateway shard this process runs.
type shard struct {
	n, total int
	lease    ShardLease // nil: no lease (one process runs every shard)
	acks     *toolkit.AckWatch

	mu      sync.Mutex
	state   shardState
	restore *shardState // the last holder's state, used by the first session

	// saveMu orders the writes of the state to the lease; saved is the
	// last one written.
	saveMu sync.Mutex
	saved  shardState
}

// save writes the shard's state to its lease when it changed since the
// last write (nothing before the session has an id).
func (sh *shard) save(ctx context.Context) error {
	sh.saveMu.Lock()
	defer sh.saveMu.Unlock()
	sh.mu.Lock()
	st := sh.state
	sh.mu.Unlock()
	if st == sh.saved || st.SessionID == "" {
		return nil
	}
	raw, _ := json.Marshal(st)
	if err := sh.lease.SetData(ctx, raw); err != nil {
		return err
	}
	sh.saved = st
	return nil
}

// savedSession writes a session the shard just identified (READY) to its
// lease before its next event is taken in: a holder killed in its first
// second leaves the successor a session to resume (what Discord sends
// meanwhile is replayed), not a fresh IDENTIFY that loses it. Its later
// progress is written every saveEvery (saveShard).
func (r *run) savedSession(ctx context.Context, sh *shard) {
	if sh.lease == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := sh.save(sctx); err != nil && ctx.Err() == nil {
		r.b.log.Warn("cannot keep the new Discord session in the shard's lease; the next holder resumes it only once it is", "shard", sh.n, "err", err)
	}
}

func (b *Bot) newShard(n, total int, l ShardLease) *shard {
	return &shard{n: n, total: total, lease: l, acks: toolkit.NewAckWatch(b.o.HeartbeatInterval)}
}

// takeRestore returns the state the first session of this shard resumes
// from (once).
func (sh *shard) takeRestore() (shardState, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.restore == nil || sh.restore.SessionID == "" {
		return shardState{}, false
	}
	st := *sh.restore
	sh.restore = nil
	return st, true
}

// session is the shard's session id as of the last event handled.
func (sh *shard) session() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.state.SessionID
}

// handled records an event the worker has handed to the sink.
func (sh *shard) handled(e *discordgo.Event) {
	if e.Operation != 0 || e.Sequence == 0 {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e.Type == "READY" {
		var d struct {
			SessionID string `json:"session_id"`
			ResumeURL string `json:"resume_gateway_url"`
		}
		_ = json.Unmarshal(e.RawData, &d)
		sh.state = shardState{SessionID: d.SessionID, ResumeURL: d.ResumeURL}
	}
	sh.state.Seq = e.Sequence
}

// shardPlan is the shard count (channels.discord.shards, auto from
// GET /gateway/bot) and the identify concurrency
// (session_start_limit.max_concurrency).
func (b *Bot) shardPlan(gb *discordgo.GatewayBotResponse) (total, conc int) {
	n, auto, err := b.cfg.Shards.Count()
	if err != nil {
		n = 1 // config.Validate reports it
	}
	conc = 1
	if gb != nil && gb.SessionStartLimit.MaxConcurrency > 0 {
		conc = gb.SessionStartLimit.MaxConcurrency
	}
	if auto {
		n = 1
		if gb != nil && gb.Shards > 0 {
			n = gb.Shards
		} else {
			b.log.Warn("channels.discord.shards is auto but GET /gateway/bot gave no shard count; running 1 shard")
		}
	}
	return n, conc
}

// shards runs the bot's shards: every one in this process without
// Options.HoldShard, else each under its lease (shard n of the app is
// "discord:<app id>:shard:<n>"). It returns when ctx ends, or the first
// error that stops the channel (a refused token).
func (r *run) shards(ctx context.Context, total int) error {
	b := r.b
	if total == 1 && b.o.HoldShard == nil {
		return r.connect(ctx, b.newShard(0, 1, nil))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var fatal atomic.Pointer[error]
	stopWith := func(err error) {
		if err != nil {
			fatal.CompareAndSwap(nil, &err)
			cancel(err)
		}
	}
	var wg sync.WaitGroup
	if b.o.HoldShard == nil {
		b.log.Info("running every Discord shard in this process", "shards", total)
		for n := range total {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stopWith(r.connect(ctx, b.newShard(n, total, nil)))
			}()
		}
		wg.Wait()
	} else {
		appID, err := b.applicationID(ctx)
		if err != nil {
			return err
		}
		// A replica that holds no shard stands by: it is healthy.
		b.health.Connected()
		b.log.Info("campaigning for the Discord shards' leases", "shards", total, "app", appID)
		for n := range total {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = b.o.HoldShard(ctx, ShardLeaseName(appID, n), func(ctx context.Context, l ShardLease) error {
					sh := b.newShard(n, total, l)
					if raw, err := l.Data(ctx); err == nil && len(raw) > 0 {
						var st shardState
						if json.Unmarshal(raw, &st) == nil {
							sh.restore = &st
						}
					}
					b.log.Info("running Discord shard", "shard", n, "shards", total, "resume", sh.restore != nil && sh.restore.SessionID != "")
					err := r.connect(ctx, sh)
					if err != nil {
						stopWith(err)
						return err
					}
					if ctx.Err() == nil {
						return nil
					}
					// The lease ended under the session (or the channel is
					// stopping): campaign again unless the channel stops.
					return context.Cause(ctx)
				})
			}()
		}
		wg.Wait()
	}
	if p := fatal.Load(); p != nil {
		return *p
	}
	return nil
}

// applicationID is the bot's application id (GET
// /oauth2/applications/@me), which names its shard leases; the bot
// user's id (the same for every application made since 2017) when that
// call is not served. It also learns the bot's user (GET /users/@me),
// which a session resumed from another replica never gets in a READY.
func (b *Bot) applicationID(ctx context.Context) (string, error) {
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		u, err := b.rest.User("@me", discordgo.WithContext(ctx))
		if err == nil {
			b.mu.Lock()
			if b.me.ID == "" {
				b.me = *u
			}
			b.mu.Unlock()
			app, aerr := b.rest.Application("@me")
			switch s := status(aerr); {
			case aerr == nil && app.ID != "":
				b.setAppID(app.ID)
				return app.ID, nil
			case s == 404 || s == 405:
				b.setAppID(u.ID)
				return u.ID, nil
			}
			err = aerr
		}
		last = err
		wait := min(time.Second<<min(attempt, 5), 30*time.Second)
		b.log.Warn("cannot read the Discord application id that names the shard leases; retrying", "in", wait, "err", b.scrub(err))
		if b.sleep(ctx, wait) != nil {
			break
		}
	}
	if last == nil {
		last = ctx.Err()
	}
	return "", core.Errorf(core.KindUnavailable, "discord: the application id: %v", b.scrub(last))
}

func (b *Bot) setAppID(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.appID == "" {
		b.appID = id
	}
}

// saveShard writes sh's session progress to its lease every saveEvery
// while it changes, and once more when the returned stop is called (the
// last events the sink took before a handover).
func (r *run) saveShard(ctx context.Context, sh *shard) (stop func()) {
	save := func(ctx context.Context) {
		if err := sh.save(ctx); err != nil && ctx.Err() == nil {
			r.b.log.Warn("cannot keep the Discord shard's session in its lease", "shard", sh.n, "err", err)
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(saveEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				save(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		// The lease is released only after the work returns: a graceful
		// stop still holds it here.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		save(sctx)
	}
}

// identifyPacer spaces IDENTIFYs as Discord requires: one per
// identifyEvery in each bucket, a shard's bucket being shard %
// max_concurrency. It paces the shards of this process.
type identifyPacer struct {
	conc  int
	every time.Duration
	sleep func(context.Context, time.Duration) error

	mu   sync.Mutex
	next map[int]time.Time
}

func newIdentifyPacer(conc int, every time.Duration, sleep func(context.Context, time.Duration) error) *identifyPacer {
	return &identifyPacer{conc: max(conc, 1), every: every, sleep: sleep, next: map[int]time.Time{}}
}

// wait returns when shard may identify.
func (p *identifyPacer) wait(ctx context.Context, shard int) error {
	bucket := shard % p.conc
	p.mu.Lock()
	now := time.Now()
	at := p.next[bucket]
	if at.Before(now) {
		at = now
	}
	p.next[bucket] = at.Add(p.every)
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return p.sleep(ctx, d)
	}
	return nil
}

// resumeAt makes s resume the session st at gateway (a websocket URL) on
// its next Open instead of identifying. discordgo keeps a session's id,
// sequence and gateway unexported and fills them only from its own
// READY, so a successor's session has them set here; when a discordgo
// upgrade renames them this fails and the shard identifies afresh.
func resumeAt(s *discordgo.Session, st shardState, gateway string) error {
	v := reflect.ValueOf(s).Elem()
	id, seq, gw := v.FieldByName("sessionID"), v.FieldByName("sequence"), v.FieldByName("gateway")
	if !id.IsValid() || id.Kind() != reflect.String || !gw.IsValid() || gw.Kind() != reflect.String ||
		!seq.IsValid() || seq.Type() != reflect.TypeOf((*int64)(nil)) {
		return errors.New("this discordgo version keeps no sessionID, sequence and gateway fields")
	}
	settable := func(f reflect.Value) reflect.Value {
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	p, _ := settable(seq).Interface().(*int64)
	if p == nil {
		return errors.New("the discordgo session has no sequence counter")
	}
	settable(id).SetString(st.SessionID)
	atomic.StoreInt64(p, st.Seq)
	if gateway != "" {
		settable(gw).SetString(fmt.Sprintf("%s?v=%s&encoding=json", gateway, discordgo.APIVersion))
	}
	return nil
}
