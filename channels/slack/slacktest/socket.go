package slacktest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// slackOrigin is the Origin header slack-go sends when it dials Socket
// Mode; the fake accepts it (a browser-style same-origin check would not).
const slackOrigin = "https://api.slack.com"

var upgrader = websocket.Upgrader{
	CheckOrigin: func(r *http.Request) bool {
		o := r.Header.Get("Origin")
		return o == "" || o == slackOrigin
	},
}

// delivery is one envelope sent (or to be sent) over Socket Mode.
type delivery struct {
	envelopeID string
	env        Envelope
	retry      int
	raw        []byte
	sentAt     time.Time
	conn       *sockConn
	acked      bool
	// target, when set, is the one connection that sends it (DeliverOn:
	// Slack hands each envelope to one of an app's connections).
	target *sockConn
}

// sockConn is one Socket Mode connection.
type sockConn struct {
	ws     *websocket.Conn
	deaf   bool // sends nothing: no pings, no envelopes
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

// socketState is the Socket Mode side of the fake; guarded by Server.mu.
type socketState struct {
	tickets  int
	connects int
	current  *sockConn
	all      []*sockConn
	pending  []*delivery // waiting for a live connection
	sent     []*delivery // sent, by order
	acks     map[string]json.RawMessage
	origins  []string
}

func (st *socketState) init() { st.acks = map[string]json.RawMessage{} }

func (s *Server) ticket() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sock.tickets++
	return strconv.Itoa(s.sock.tickets)
}

// Connects is how many Socket Mode connections were opened so far.
func (s *Server) Connects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.connects
}

// Origins returns the Origin header of every Socket Mode connection.
func (s *Server) Origins() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sock.origins...)
}

func (s *Server) serveLink(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered already
	}
	c := &sockConn{ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
	hello, _ := json.Marshal(map[string]any{"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "slacktest", "approximate_connection_time": 3600},
		"connection_info": map[string]any{"app_id": "A0TEST"}})
	if err := ws.WriteMessage(websocket.TextMessage, hello); err != nil {
		ws.Close()
		return
	}
	s.mu.Lock()
	s.sock.connects++
	s.sock.origins = append(s.sock.origins, origin)
	s.sock.current = c
	s.sock.all = append(s.sock.all, c)
	s.notify()
	s.mu.Unlock()
	go s.readAcks(c)
	s.pump(c)
}

// readAcks records the envelope ids the client acknowledges.
func (s *Server) readAcks(c *sockConn) {
	defer close(c.done)
	for {
		_, msg, err := c.ws.ReadMessage()
		if err != nil {
			s.mu.Lock()
			c.closed = true
			if s.sock.current == c {
				s.sock.current = nil
			}
			s.notify()
			s.mu.Unlock()
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(msg, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		s.sock.acks[ack.EnvelopeID] = ack.Payload
		for _, d := range s.sock.sent {
			if d.envelopeID == ack.EnvelopeID {
				d.acked = true
			}
		}
		s.notify()
		s.mu.Unlock()
	}
}

// pump is the one writer of a connection: pings, envelopes and
// redeliveries of envelopes left unacknowledged.
func (s *Server) pump(c *sockConn) {
	ping := time.NewTicker(s.o.PingEvery)
	defer ping.Stop()
	check := time.NewTicker(max(s.o.AckTimeout/4, 10*time.Millisecond))
	defer check.Stop()
	defer c.ws.Close()
	for {
		select {
		case <-c.done:
			return
		case <-ping.C:
			s.mu.Lock()
			deaf := c.deaf
			s.mu.Unlock()
			if !deaf {
				if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)); err != nil {
					return
				}
			}
		case <-c.wake:
		case <-check.C:
		}
		for _, d := range s.due(c) {
			if err := c.ws.WriteMessage(websocket.TextMessage, d.raw); err != nil {
				return
			}
		}
	}
}

// due takes what connection c should send now: redeliveries of overdue
// envelopes first, then the pending ones.
func (s *Server) due(c *sockConn) []*delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.deaf || c.closed {
		return nil
	}
	now := time.Now()
	if s.sock.current != c {
		// Not the current connection: only what was handed to it.
		var out []*delivery
		rest := s.sock.pending[:0:0]
		for _, d := range s.sock.pending {
			if d.target == c {
				d.sentAt, d.conn = now, c
				out = append(out, d)
				s.sock.sent = append(s.sock.sent, d)
			} else {
				rest = append(rest, d)
			}
		}
		s.sock.pending = rest
		if len(out) > 0 {
			s.notify()
		}
		return out
	}
	for _, d := range s.sock.sent {
		if d.acked || d.retry < 0 || now.Sub(d.sentAt) < s.o.AckTimeout {
			continue
		}
		if d.retry >= s.o.MaxRetries {
			d.retry = -1 // given up, as Slack does
			continue
		}
		again := s.newDelivery(d.env, d.retry+1)
		d.retry = -1 // this one is replaced by the redelivery
		s.sock.pending = append(s.sock.pending, again)
	}
	var out, rest []*delivery
	for _, d := range s.sock.pending {
		if d.target == nil || d.target == c || d.target.closed {
			out = append(out, d)
		} else {
			rest = append(rest, d)
		}
	}
	s.sock.pending = rest
	for _, d := range out {
		d.sentAt, d.conn = now, c
		s.sock.sent = append(s.sock.sent, d)
	}
	if len(out) > 0 {
		s.notify()
	}
	return out
}

// newDelivery wraps env in a fresh envelope; the caller holds mu.
func (s *Server) newDelivery(env Envelope, retry int) *delivery {
	d := &delivery{envelopeID: s.newID("env-"), env: env, retry: retry}
	if env.Type == "raw" {
		d.raw, d.retry = env.Payload, -1 // sent once, never again
		return d
	}
	frame := map[string]any{
		"type": env.Type, "envelope_id": d.envelopeID, "payload": env.Payload,
		"accepts_response_payload": env.Type != "events_api", "retry_attempt": retry,
	}
	if retry > 0 {
		frame["retry_reason"] = "timeout"
	}
	d.raw, _ = json.Marshal(frame)
	return d
}

// Deliver sends env over Socket Mode (now, or as soon as a connection is
// up) and returns it.
func (s *Server) Deliver(env Envelope) Envelope {
	return s.deliver(env, 0)
}

// Redeliver sends env again as a new envelope with the same event, as
// Slack does when it did not see an acknowledgement in time; retry is its
// retry_attempt (0: a duplicate delivery without a retry marker).
func (s *Server) Redeliver(env Envelope, retry int) {
	s.deliver(env, retry)
}

func (s *Server) deliver(env Envelope, retry int) Envelope {
	s.mu.Lock()
	s.sock.pending = append(s.sock.pending, s.newDelivery(env, retry))
	c := s.sock.current
	s.notify()
	s.mu.Unlock()
	if c != nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return env
}

// Live is how many Socket Mode connections are open.
func (s *Server) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live())
}

// live lists the open connections in the order they connected; the
// caller holds mu.
func (s *Server) live() []*sockConn {
	var out []*sockConn
	for _, c := range s.sock.all {
		if !c.closed {
			out = append(out, c)
		}
	}
	return out
}

// DeliverOn sends env over the n-th open Socket Mode connection (0-based,
// in the order they connected), as Slack hands each envelope to one of
// an app's connections (up to 10), and returns it. A redelivery after a
// missed acknowledgement goes over the current (latest) connection. It
// panics when fewer than n+1 connections are open.
func (s *Server) DeliverOn(env Envelope, n int) Envelope {
	s.mu.Lock()
	live := s.live()
	if n >= len(live) {
		s.mu.Unlock()
		panic("slacktest: DeliverOn a connection that is not open")
	}
	c := live[n]
	d := s.newDelivery(env, 0)
	d.target = c
	s.sock.pending = append(s.sock.pending, d)
	s.notify()
	s.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return env
}

// SendRaw sends one text frame as it is (a malformed or unknown envelope).
func (s *Server) SendRaw(frame string) {
	s.deliver(Envelope{Type: "raw", Payload: json.RawMessage(frame)}, 0)
}

// Acked reports whether some delivery of env's event was acknowledged.
func (s *Server) Acked(env Envelope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.sock.sent {
		if d.acked && d.env.key() == env.key() {
			return true
		}
	}
	return false
}

// AckedEvery reports whether every delivery of env's event so far was
// acknowledged.
func (s *Server) AckedEvery(env Envelope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.sock.sent {
		if d.env.key() == env.key() {
			if !d.acked {
				return false
			}
			n++
		}
	}
	return n > 0
}

// AckedEnvelope reports whether the envelope with this id was acknowledged,
// and the payload of the acknowledgement.
func (s *Server) AckedEnvelope(id string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.sock.acks[id]
	return p, ok
}

// AckPayload returns the payload the acknowledgement of env carried (a
// slash command's immediate answer), and whether env was acknowledged.
func (s *Server) AckPayload(env Envelope) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.sock.sent {
		if d.acked && d.env.key() == env.key() {
			return s.sock.acks[d.envelopeID], true
		}
	}
	return nil, false
}

// Deliveries is how many times env was sent over Socket Mode.
func (s *Server) Deliveries(env Envelope) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.sock.sent {
		if d.env.key() == env.key() {
			n++
		}
	}
	return n
}

// Silence makes the current connection deaf: it stays open but sends
// nothing more, no envelope and no ping (later connections are normal).
func (s *Server) Silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sock.current != nil {
		s.sock.current.deaf = true
	}
}

// Disconnect asks the client to reconnect, as Slack does before it
// recycles a connection.
func (s *Server) Disconnect() {
	s.SendRaw(`{"type":"disconnect","reason":"refresh_requested","debug_info":{"host":"slacktest"}}`)
}

// WaitConnected waits until n Socket Mode connections were opened and the
// last one is live.
func (s *Server) WaitConnected(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	s.WaitFor(t, strconv.Itoa(n)+" Socket Mode connections", timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.sock.connects >= n && s.sock.current != nil
	})
}

func (s *Server) closeSockets() {
	s.mu.Lock()
	all := append([]*sockConn(nil), s.sock.all...)
	s.mu.Unlock()
	for _, c := range all {
		c.ws.Close()
	}
}
