package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/opentalon/opentalon/core"
)

// Gateway close codes the channel acts on.
const (
	closeAuthenticationFailed = 4004
	closeInvalidSeq           = 4007
	closeSessionTimedOut      = 4009
	closeInvalidShard         = 4010
	closeShardingRequired     = 4011
	closeInvalidAPIVersion    = 4012
	closeInvalidIntents       = 4013
	closeDisallowedIntents    = 4014
)

// openTimeout bounds one gateway handshake (dial, HELLO, READY).
const openTimeout = 30 * time.Second

// revokedRetry is the wait between reconnects while Discord refuses a
// token that worked before.
const revokedRetry = 30 * time.Second

// run is the state of one Run: the sink, the events read from the
// gateway on their way to the sink, and the connection-lost signal.
type run struct {
	b      *Bot
	sink   core.Sink
	events chan shardEvent
	done   chan struct{} // closed when Run is leaving
	pacer  *identifyPacer
	// background holds the goroutines Run waits for (the event worker,
	// command registration).
	background sync.WaitGroup
	registered bool // commands registered in this Run (worker only)
}

// shardEvent is an event read from a shard's session.
type shardEvent struct {
	sh *shard
	e  *discordgo.Event
}

// Run implements core.Channel: it checks the token, connects to the
// gateway and hands events to sink until ctx ends, reconnecting (resume
// first, a fresh identify when resuming keeps failing) whenever the
// connection is lost or its heartbeats go unacknowledged.
func (b *Bot) Run(ctx context.Context, sink core.Sink) error {
	b.mu.Lock()
	b.keeper, _ = sink.(core.CredentialKeeper)
	b.mu.Unlock()
	b.health.Down(errors.New("discord: not connected to the gateway yet"))
	// The token is checked over REST first (a clear 401), then again by
	// the gateway (close code 4004).
	gb, err := b.rest.GatewayBot(discordgo.WithContext(ctx))
	if err != nil {
		gb = nil
		switch s := status(err); {
		case ctx.Err() != nil && s != http.StatusUnauthorized:
			return nil // a refusal that came with the stop still fails the start (below)
		case s == http.StatusUnauthorized:
			return core.Errorf(core.KindAuth, "discord refused the bot token (GET /api/v9/gateway/bot: 401 Unauthorized): check channels.discord.token (developer portal → your app → Bot → Reset Token) and channels.discord.api_url")
		case s == 0 || s >= 500:
			err = fmt.Errorf("discord gateway discovery at %s: %w", core.RedactURL(b.root.String()), b.scrub(err))
			b.health.Down(err)
			return err
		default:
			// A server without /gateway/bot: the gateway checks the token.
			b.log.Debug("GET /gateway/bot failed; connecting anyway", "err", b.scrub(err))
		}
	}
	total, conc := b.shardPlan(gb)
	r := &run{b: b, sink: sink, events: make(chan shardEvent, 256), done: make(chan struct{}),
		pacer: newIdentifyPacer(conc, b.o.IdentifyInterval, b.sleep)}
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		r.work(ctx)
	}()
	err = r.shards(ctx, total)
	close(r.done)
	r.background.Wait()
	if err != nil {
		b.health.Down(err)
	}
	return err
}

// gatewaySession is one identified session: a discordgo session used for
// the gateway only, and the tracker of its network connection.
type gatewaySession struct {
	s    *discordgo.Session
	tr   *connTracker
	sh   *shard
	lost chan struct{}
	// known: the session has an id (READY seen, or restored from the
	// lease), so opening it resumes instead of identifying.
	known atomic.Bool
}

func (r *run) newGatewaySession(intents discordgo.Intent, sh *shard) *gatewaySession {
	g := &gatewaySession{s: r.b.newSession(), tr: &connTracker{}, sh: sh, lost: make(chan struct{}, 1)}
	if sh.total > 1 {
		g.s.ShardID, g.s.ShardCount = sh.n, sh.total
	}
	if st, ok := sh.takeRestore(); ok {
		if err := resumeAt(g.s, st, r.b.gatewayURL(st.ResumeURL)); err != nil {
			r.b.log.Warn("cannot resume the shard's session where the last holder left it; identifying afresh", "shard", sh.n, "err", err)
		} else {
			g.known.Store(true)
			r.b.log.Info("resuming the shard's session where the last holder left it", "shard", sh.n, "seq", st.Seq)
		}
	}
	g.s.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second, NetDialContext: g.tr.dial}
	// Events are handed over in order on the library's reader goroutine;
	// the worker processes them, so reading (and heartbeat ACKs) goes on
	// while the sink commits.
	g.s.SyncEvents = true
	g.s.Identify.Intents = intents
	g.s.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) {
		if e.Type == "READY" {
			g.known.Store(true)
		}
		select {
		case r.events <- shardEvent{sh: sh, e: e}:
		case <-r.done:
		}
	})
	g.s.AddHandler(func(*discordgo.Session, *discordgo.Disconnect) {
		select {
		case g.lost <- struct{}{}:
		default:
		}
	})
	return g
}

// close ends the session: the close frame and the library's goroutines.
// A shard held under a lease closes with a code that keeps the session
// resumable, so the next holder resumes it; otherwise the normal closure
// ends the session at Discord.
func (g *gatewaySession) close() {
	if g.sh.lease != nil {
		_ = g.s.CloseWithCode(closeHandover)
	} else {
		_ = g.s.Close()
	}
	g.tr.shutdown()
}

// connect runs shard sh's connections until ctx ends or the start cannot
// work.
func (r *run) connect(ctx context.Context, sh *shard) error {
	b := r.b
	intents := baseIntents | discordgo.IntentMessageContent
	var g *gatewaySession
	if sh.lease != nil {
		stop := r.saveShard(ctx, sh)
		defer stop()
	}
	defer func() {
		if g != nil {
			g.close()
		}
	}()
	discard := func() {
		if g != nil {
			g.close()
			g = nil
		}
	}
	failures := 0
	connected := false // connected at least once in this Run
	// short counts the connections in a row that were lost within
	// stableConnection: a gateway that accepts and drops at once is
	// retried with the same backoff as one that refuses.
	short := 0
	for {
		if g == nil {
			g = r.newGatewaySession(intents, sh)
		}
		select {
		case <-g.lost: // stale: a connection already known to be gone
		default:
		}
		if !g.known.Load() {
			if r.pacer.wait(ctx, sh.n) != nil {
				return nil
			}
		}
		err := r.open(ctx, g)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, discordgo.ErrWSAlreadyOpen) {
			err = nil // a late signal of a connection that was already replaced
		}
		if err != nil {
			code := closeCode(err)
			switch code {
			case closeAuthenticationFailed:
				if !connected {
					return core.Errorf(core.KindAuth, "discord refused the bot token at the gateway (close code 4004, authentication failed): check channels.discord.token (developer portal → your app → Bot → Reset Token)")
				}
				// It worked before: revoked or reset since. Other channels
				// keep answering; /readyz reports this one.
				b.health.Down(errors.New("discord refused the bot token (close code 4004): set the new token in channels.discord.token and restart"))
				b.log.Error("Discord refused the bot token on reconnect (close code 4004): it was reset or revoked; set the new one in channels.discord.token and restart. Retrying every 30s")
				discard()
				if b.sleep(ctx, revokedRetry) != nil {
					return nil
				}
				continue
			case closeDisallowedIntents:
				if intents&discordgo.IntentMessageContent != 0 {
					b.log.Warn("Discord refused the privileged Message Content intent (close code 4014, disallowed intents): enable \"Message Content Intent\" in the Discord developer portal (Applications → your app → Bot → Privileged Gateway Intents) and restart. Until then the bot reads only DMs and messages that mention it; trigger: all cannot work")
					intents &^= discordgo.IntentMessageContent
					discard()
					continue
				}
				return core.Errorf(core.KindInvalid, "discord refused the gateway intents (close code 4014) even without Message Content: check the bot's settings in the developer portal")
			case closeInvalidShard, closeShardingRequired, closeInvalidAPIVersion, closeInvalidIntents:
				return core.Errorf(core.KindInvalid, "discord closed the gateway with code %d (%s): this bot cannot connect as configured", code, closeText(err))
			case closeInvalidSeq, closeSessionTimedOut:
				b.log.Info("the Discord session cannot be resumed; identifying afresh", "close_code", code)
				discard()
			}
			failures++
			err = fmt.Errorf("discord gateway: %w", b.scrub(err))
			b.health.Down(err)
			if failures%b.o.ResumeAttempts == 0 {
				// Resuming keeps failing: start a new session.
				b.log.Warn("reconnecting to the Discord gateway keeps failing; identifying afresh", "attempts", failures, "err", err)
				discard()
			}
			wait := min(time.Second<<min(failures-1, 6), time.Minute)
			b.log.Warn("connecting to the Discord gateway failed; retrying", "in", wait, "attempts", failures, "err", err)
			if b.sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		if failures > 0 {
			b.log.Info("connected to the Discord gateway again", "attempts", failures)
		}
		failures, connected = 0, true
		b.health.Connected()
		up := b.now()
		r.waitLost(ctx, g)
		if ctx.Err() != nil {
			return nil
		}
		b.health.Down(errors.New("discord: the gateway connection was lost; reconnecting"))
		if lived := b.now().Sub(up); lived < stableConnection {
			short++
			wait := min(time.Second<<min(short-1, 6), time.Minute)
			b.log.Warn("the Discord gateway connection was lost soon after it opened; resuming the session after a wait", "lived", lived.Round(time.Millisecond), "in", wait, "in_a_row", short)
			if b.sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		short = 0
		b.log.Warn("the Discord gateway connection was lost; resuming the session")
	}
}

// stableConnection is how long a gateway connection must last for the
// next one to be opened at once when it is lost.
const stableConnection = 30 * time.Second

// open runs the library's handshake, bounded by ctx and openTimeout: the
// tracker drops the connection to end a handshake that hangs.
func (r *run) open(ctx context.Context, g *gatewaySession) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("the gateway handshake failed inside the Discord library: %v", p)
			}
		}()
		done <- g.s.Open()
	}()
	t := time.NewTimer(openTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		g.tr.drop()
		<-done
		return ctx.Err()
	case <-t.C:
		g.tr.drop()
		<-done
		return fmt.Errorf("no READY from the Discord gateway within %s", openTimeout)
	}
}

// waitLost returns when the connection is lost or ctx ends. Meanwhile it
// watches the heartbeat ACKs: a connection without one for two heartbeat
// intervals is dropped at once (the library would wait five).
func (r *run) waitLost(ctx context.Context, g *gatewaySession) {
	b := r.b
	acks := g.sh.acks
	acks.Connected(time.Now())
	defer acks.Stopped()
	period := func() time.Duration { return min(max(acks.Interval()/4, 10*time.Millisecond), 5*time.Second) }
	tick := time.NewTicker(period())
	defer tick.Stop()
	dropped := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.lost:
			if !g.tr.open() {
				return
			}
			// A late signal of a connection replaced since: this one is open.
		case <-tick.C:
			g.s.RLock()
			last := g.s.LastHeartbeatAck
			g.s.RUnlock()
			acks.Ack(last)
			if silent, overdue := acks.Overdue(time.Now()); overdue && !dropped {
				b.log.Warn("no heartbeat ACK from the Discord gateway: the connection is dead although open; dropping it and resuming",
					"shard", g.sh.n, "silent", silent.Round(time.Millisecond), "heartbeat_interval", acks.Interval())
				g.tr.drop()
				dropped = true
			}
			tick.Reset(period())
		}
	}
}

// closeCode returns the websocket close code of err (0 when none).
func closeCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

func closeText(err error) string {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Text
	}
	return ""
}
