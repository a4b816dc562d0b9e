package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// The library's own watchdog recycles a connection that saw no ping for
// its interval. The channel's watchdog (toolkit.Liveness over every byte
// the connection reads) counts envelopes as well as pings, so the
// library's is set far out of the way.
const libraryPingInterval = 24 * time.Hour

// runSocket receives events by Socket Mode until ctx ends. slack-go
// reconnects by itself (with backoff) when a connection drops or Slack
// asks for it; a session ends only when Slack refuses the app token.
func (b *Bot) runSocket(ctx context.Context, sink core.Sink) error {
	if b.o.HoldSlot == nil {
		return b.socketLoop(ctx, sink)
	}
	// One connection slot per replica: a replica standing by for one is
	// healthy (readiness does not depend on the leases it holds).
	b.health.Connected()
	prefix := "slack:" + b.identity().BotID + ":socket:"
	var fatal error
	err := b.o.HoldSlot(ctx, prefix, SocketSlots, func(sctx context.Context) error {
		b.log.Info("this replica holds a Slack Socket Mode slot")
		err := b.socketLoop(sctx, sink)
		if ctx.Err() != nil {
			return nil
		}
		b.health.Connected() // standing by again
		if core.Refusal(err) {
			fatal = err
			return nil // ends the hold: the channel stops with err
		}
		if err == nil {
			err = errors.New("slack: the Socket Mode slot's lease ended; taking a slot again")
		}
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	if fatal != nil {
		return fatal
	}
	return err
}

// socketLoop runs Socket Mode sessions until ctx ends or Slack refuses
// the app token for good.
func (b *Bot) socketLoop(ctx context.Context, sink core.Sink) error {
	for {
		connected, err := b.socketSession(ctx, sink)
		if ctx.Err() != nil {
			return nil
		}
		if core.ErrorKind(err) != core.KindAuth {
			return err
		}
		if !connected && !b.socketWorked() {
			return err // refused at the first start: fatal, naming the key
		}
		if b.waitAfterRefusal(ctx, keyAppToken, err) != nil {
			return nil
		}
	}
}

func (b *Bot) socketWorked() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.socketOK
}

// liveConn reports every read of a connection as a sign of life.
type liveConn struct {
	net.Conn
	beat   func()
	closed atomic.Bool
}

func (c *liveConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func (c *liveConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.beat()
	}
	return n, err
}

// socketSession runs one socketmode client until it gives up (Slack
// refused the app token) or ctx ends. It reports whether it connected.
func (b *Bot) socketSession(ctx context.Context, sink core.Sink) (connected bool, err error) {
	live := toolkit.NewLiveness(b.o.Quiet, b.now)
	var mu sync.Mutex
	var conn *liveConn // the connection slack-go dialed last
	dial := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	dialer := &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: 45 * time.Second,
		WriteBufferSize:  32 << 10, // one frame per answer, as slack-go's own dialer
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			live.Beat()
			lc := &liveConn{Conn: c, beat: live.Beat}
			mu.Lock()
			conn = lc
			mu.Unlock()
			return lc, nil
		},
	}
	smc := socketmode.New(b.api, socketmode.OptionDialer(dialer), socketmode.OptionPingInterval(libraryPingInterval))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- smc.RunContext(sctx) }()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		live.Watch(sctx, func() {
			mu.Lock()
			c := conn
			mu.Unlock()
			if c == nil || c.closed.Load() {
				return // between connections: slack-go's backoff goes on
			}
			b.log.Warn("no envelope and no ping from Slack for a while: the connection is deaf; reconnecting", "quiet", b.o.Quiet)
			b.health.Failed(errors.New("the Socket Mode connection went quiet; reconnecting"))
			c.Close()
		})
	}()
	defer func() {
		cancel()
		<-watchDone
	}()
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-runErr
			return connected, nil
		case err := <-runErr:
			// Events slack-go queued before it gave up are still handled:
			// a connection it made counts, and so does an envelope read.
			for pending := true; pending; {
				select {
				case ev := <-smc.Events:
					connected = b.socketEvent(ctx, smc, sink, ev) || connected
				default:
					pending = false
				}
			}
			return connected, b.socketFailed(err)
		case ev := <-smc.Events:
			connected = b.socketEvent(ctx, smc, sink, ev) || connected
		}
	}
}

// socketEvent handles one event and reports whether it was a connection.
func (b *Bot) socketEvent(ctx context.Context, smc *socketmode.Client, sink core.Sink, ev socketmode.Event) bool {
	b.onSocketEvent(ctx, smc, sink, ev)
	return ev.Type == socketmode.EventTypeConnected
}

// socketFailed turns the error socketmode gave up with into the channel's.
func (b *Bot) socketFailed(err error) error {
	if err == nil {
		return errors.New("slack socket mode stopped")
	}
	if code := err.Error(); authErrors[code] {
		err = &core.Error{Kind: core.KindAuth, Msg: fmt.Sprintf("slack apps.connections.open: %s: Slack refused the app-level token; check channels.slack.app_token (xapp-…, scope connections:write)", code), Err: err}
		b.health.Down(err)
		return err
	}
	err = b.classify("apps.connections.open", keyAppToken, err)
	b.health.Failed(err)
	if core.ErrorKind(err) == core.KindInvalid && !b.socketWorked() {
		return err // a 404 at the first start: api_url is wrong
	}
	// Anything else is not the config's fault: the gateway restarts the
	// channel with backoff.
	return fmt.Errorf("slack socket mode stopped: %s", err)
}

// onSocketEvent handles one event of the socketmode client. Envelopes are
// acknowledged only after their event was committed (or deliberately
// ignored); one Slack could not read is acknowledged and logged, so it is
// not delivered again.
func (b *Bot) onSocketEvent(ctx context.Context, smc *socketmode.Client, sink core.Sink, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeConnecting:
		b.log.Debug("connecting to Slack Socket Mode")
	case socketmode.EventTypeConnectionError:
		err := errors.New("connection failed")
		if ce, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
			err = b.scrubber.Error(ce.ErrorObj)
		}
		if code := slackCode(err); code != "" && !transientErrors[code] {
			// Slack answered apps.connections.open with ok:false (a
			// missing scope, the wrong kind of token): slack-go retries
			// it all the same, so say what to change. A transient code
			// (internal_error, …) is only a failed attempt.
			err = b.classify("apps.connections.open", keyAppToken, err)
			b.health.Failed(err)
			b.log.Error("Slack refused the Socket Mode connection; slack-go retries with backoff", "err", err)
			return
		}
		b.health.Failed(err)
		b.log.Warn("Socket Mode connection failed; slack-go retries with backoff", "err", err)
	case socketmode.EventTypeInvalidAuth:
		b.log.Error("Slack refused the Socket Mode connection (HTTP 404 from apps.connections.open); check channels.slack.app_token and channels.slack.api_url")
	case socketmode.EventTypeConnected:
		b.mu.Lock()
		b.socketOK = true
		b.mu.Unlock()
		b.credentialWorks(keyAppToken)
		b.health.Connected()
		b.log.Info("Socket Mode connected")
	case socketmode.EventTypeHello:
		b.health.Event()
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		b.log.Debug("Socket Mode connection error; slack-go reconnects", "type", ev.Type)
	case socketmode.EventTypeErrorBadMessage:
		b.badEnvelope(ctx, smc, ev)
	case socketmode.EventTypeEventsAPI:
		b.health.Event()
		b.onEventsAPI(ctx, smc, sink, ev)
	case socketmode.EventTypeSlashCommand:
		b.health.Event()
		cmd, ok := ev.Data.(slack.SlashCommand)
		if !ok || ev.Request == nil {
			return
		}
		refusal, err := b.handleSlash(ctx, sink, cmd, ev.Request.EnvelopeID)
		if err != nil {
			b.log.Warn("slash command not committed; Slack will deliver it again", "command", cmd.Command, "err", err)
			return
		}
		if refusal != "" {
			if err := smc.AckCtx(ctx, ev.Request.EnvelopeID, ephemeralPayload(refusal)); err != nil && ctx.Err() == nil {
				b.log.Warn("acknowledging an envelope failed; Slack will deliver it again", "envelope_id", ev.Request.EnvelopeID, "err", err)
			}
			return
		}
		b.ack(ctx, smc, ev.Request.EnvelopeID)
	default:
		// Interactive payloads and whatever Slack adds: not answered here.
		if ev.Request != nil && ev.Request.EnvelopeID != "" {
			b.log.Debug("Socket Mode envelope ignored", "type", ev.Type)
			b.ack(ctx, smc, ev.Request.EnvelopeID)
		}
	}
}

// onEventsAPI handles an events_api envelope. A redelivery Slack marks as
// a retry of an event already committed is only acknowledged.
func (b *Bot) onEventsAPI(ctx context.Context, smc *socketmode.Client, sink core.Sink, ev socketmode.Event) {
	api, ok := ev.Data.(slackevents.EventsAPIEvent)
	if !ok || ev.Request == nil {
		return
	}
	var eventID string
	if cb, ok := api.Data.(*slackevents.EventsAPICallbackEvent); ok {
		eventID = cb.EventID
	}
	if ev.Request.RetryAttempt > 0 && b.committed.Has(eventID) {
		b.log.Debug("redelivered event already committed", "event_id", eventID, "retry", ev.Request.RetryAttempt)
		b.ack(ctx, smc, ev.Request.EnvelopeID)
		return
	}
	if err := b.handleEvent(ctx, sink, eventID, api.InnerEvent); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("event not committed; Slack will deliver it again", "event_id", eventID, "err", err)
		}
		return
	}
	b.committed.Add(eventID)
	b.ack(ctx, smc, ev.Request.EnvelopeID)
}

// badEnvelope acknowledges an envelope slack-go could not read (malformed
// or of an unknown kind) so Slack does not send it again, and logs it.
func (b *Bot) badEnvelope(ctx context.Context, smc *socketmode.Client, ev socketmode.Event) {
	var cause error
	var raw json.RawMessage
	if bm, ok := ev.Data.(*socketmode.ErrorBadMessage); ok {
		cause, raw = bm.Cause, bm.Message
	}
	var head struct {
		Type       string `json:"type"`
		EnvelopeID string `json:"envelope_id"`
	}
	_ = json.Unmarshal(raw, &head)
	b.log.Warn("Socket Mode envelope not understood; acknowledged and dropped", "type", head.Type, "envelope_id", head.EnvelopeID, "err", cause)
	if head.EnvelopeID != "" {
		b.ack(ctx, smc, head.EnvelopeID)
	}
}

// ack acknowledges one envelope.
func (b *Bot) ack(ctx context.Context, smc *socketmode.Client, envelopeID string) {
	if err := smc.AckCtx(ctx, envelopeID, nil); err != nil && ctx.Err() == nil {
		b.log.Warn("acknowledging an envelope failed; Slack will deliver it again", "envelope_id", envelopeID, "err", err)
	}
}
