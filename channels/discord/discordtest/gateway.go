package discordtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway opcodes and close codes the fake uses.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11

	// CloseUnknownError asks the client to reconnect (and resume).
	CloseUnknownError = 4000
	// CloseNotAuthenticated: a payload before IDENTIFY.
	CloseNotAuthenticated = 4003
	// CloseAuthenticationFailed: the token is invalid.
	CloseAuthenticationFailed = 4004
	// CloseDisallowedIntents: a privileged intent not enabled for the bot.
	CloseDisallowedIntents = 4014

	// IntentMessageContent is the privileged intent to read message text.
	IntentMessageContent = 1 << 15
)

// Identify is one IDENTIFY the gateway received.
type Identify struct {
	Intents int
	At      time.Time
}

// gateway is the fake's websocket side. One session at a time: a new
// IDENTIFY starts a new session, a RESUME of the current session replays
// the events after the client's sequence number.
type gateway struct {
	s        *Server
	upgrader websocket.Upgrader

	mu              sync.Mutex
	heartbeat       time.Duration
	contentAllowed  bool
	closeOnIdentify int
	failResumes     bool
	refuse          bool
	conns           map[*gwConn]bool
	cur             *gwConn // the connection events go to (READY or RESUMED sent)
	session         string
	seq             int64
	log             []loggedEvent
	identifies      []Identify
	resumes         int
	connections     int
	heartbeats      int
}

type loggedEvent struct {
	seq   int64
	frame []byte
}

// gwConn is one websocket connection.
type gwConn struct {
	ws     *websocket.Conn
	wmu    sync.Mutex
	acks   bool // heartbeats are acknowledged
	zombie bool // nothing is written to it any more
}

func (g *gateway) init(s *Server) {
	g.s = s
	g.heartbeat = 45 * time.Second
	g.contentAllowed = true
	g.conns = map[*gwConn]bool{}
}

func (c *gwConn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.zombie {
		return nil
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, frame)
}

func (c *gwConn) close(code int, text string) {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
}

func payload(op int, t string, seq int64, d any) []byte {
	p := map[string]any{"op": op, "d": d}
	if op == opDispatch {
		p["t"], p["s"] = t, seq
	} else {
		p["t"], p["s"] = nil, nil
	}
	b, _ := json.Marshal(p)
	return b
}

// serve accepts one gateway connection and runs it until it closes.
func (g *gateway) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	refuse := g.refuse
	g.mu.Unlock()
	if refuse {
		http.Error(w, "gateway unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := g.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws, acks: true}
	g.mu.Lock()
	g.conns[c] = true
	g.connections++
	interval := g.heartbeat
	g.mu.Unlock()
	g.s.changedLocked()
	defer func() {
		g.mu.Lock()
		delete(g.conns, c)
		if g.cur == c {
			g.cur = nil
		}
		g.mu.Unlock()
		_ = ws.Close()
		g.s.changedLocked()
	}()
	if c.write(payload(opHello, "", 0, map[string]any{"heartbeat_interval": interval.Milliseconds()})) != nil {
		return
	}
	authed := false
	for {
		_, raw, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var p struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(raw, &p) != nil {
			c.close(4002, "Decode error")
			return
		}
		switch p.Op {
		case opHeartbeat:
			g.mu.Lock()
			g.heartbeats++
			g.mu.Unlock()
			g.s.changedLocked()
			c.wmu.Lock()
			ack := c.acks
			c.wmu.Unlock()
			if ack && c.write(payload(opHeartbeatAck, "", 0, nil)) != nil {
				return
			}
		case opIdentify:
			if !g.identify(c, p.D) {
				return
			}
			authed = true
		case opResume:
			if !g.resume(c, p.D) {
				return
			}
			authed = true
		default:
			if !authed {
				c.close(CloseNotAuthenticated, "Not authenticated.")
				return
			}
		}
	}
}

// identify starts a new session on c; false means c was closed.
func (g *gateway) identify(c *gwConn, raw json.RawMessage) bool {
	var d struct {
		Token   string `json:"token"`
		Intents int    `json:"intents"`
	}
	_ = json.Unmarshal(raw, &d)
	g.mu.Lock()
	g.identifies = append(g.identifies, Identify{Intents: d.Intents, At: time.Now()})
	closeCode, content := g.closeOnIdentify, g.contentAllowed
	g.mu.Unlock()
	g.s.changedLocked()
	switch {
	case strings.TrimPrefix(d.Token, "Bot ") != g.s.Token:
		c.close(CloseAuthenticationFailed, "Authentication failed.")
		return false
	case closeCode != 0:
		c.close(closeCode, "Closed by the test.")
		return false
	case d.Intents&IntentMessageContent != 0 && !content:
		c.close(CloseDisallowedIntents, "Disallowed intent(s).")
		return false
	}
	g.mu.Lock()
	g.cur = nil // until READY is out
	g.session = g.s.newID()
	g.seq = 1
	g.log = nil
	ready := payload(opDispatch, "READY", g.seq, map[string]any{
		"v": 9, "user": g.s.Bot, "guilds": []any{}, "session_id": g.session,
		"resume_gateway_url": g.s.wsURL(), "application": map[string]any{"id": g.s.AppID, "flags": 1 << 19},
	})
	g.mu.Unlock()
	if c.write(ready) != nil {
		return false
	}
	// Events go to the connection only once READY is out.
	g.mu.Lock()
	g.cur = c
	g.mu.Unlock()
	g.s.changedLocked()
	return true
}

// resume resumes the current session on c: the events the client missed,
// then RESUMED. A resume of another session gets an invalid session
// (the client is expected to identify); with FailResumes the connection
// is closed instead.
func (g *gateway) resume(c *gwConn, raw json.RawMessage) bool {
	var d struct {
		Token   string `json:"token"`
		Session string `json:"session_id"`
		Seq     int64  `json:"seq"`
	}
	_ = json.Unmarshal(raw, &d)
	g.mu.Lock()
	g.resumes++
	fail, session := g.failResumes, g.session
	g.mu.Unlock()
	g.s.changedLocked()
	switch {
	case strings.TrimPrefix(d.Token, "Bot ") != g.s.Token:
		c.close(CloseAuthenticationFailed, "Authentication failed.")
		return false
	case fail:
		c.close(CloseUnknownError, "Unknown error.")
		return false
	case d.Session != session:
		return c.write(payload(opInvalidSession, "", 0, false)) == nil
	}
	g.mu.Lock()
	g.cur = nil // until RESUMED is out
	var replay [][]byte
	for _, e := range g.log {
		if e.seq > d.Seq {
			replay = append(replay, e.frame)
		}
	}
	g.seq++
	resumed := payload(opDispatch, "RESUMED", g.seq, map[string]any{})
	g.log = append(g.log, loggedEvent{seq: g.seq, frame: resumed})
	g.mu.Unlock()
	for _, f := range replay {
		if c.write(f) != nil {
			return false
		}
	}
	if c.write(resumed) != nil {
		return false
	}
	g.mu.Lock()
	g.cur = c
	g.mu.Unlock()
	g.s.changedLocked()
	return true
}

func (g *gateway) closeAll() {
	g.mu.Lock()
	conns := make([]*gwConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.Close()
	}
}

// changedLocked wakes waiters; the caller does not hold mu.
func (s *Server) changedLocked() {
	s.mu.Lock()
	s.notify()
	s.mu.Unlock()
}

// SetHeartbeatInterval sets the interval HELLO announces to later
// connections (default 45s).
func (s *Server) SetHeartbeatInterval(d time.Duration) {
	s.gw.mu.Lock()
	s.gw.heartbeat = d
	s.gw.mu.Unlock()
}

// SetMessageContentAllowed says whether the bot may have the message
// content intent (default true); an IDENTIFY asking for it while not
// allowed is closed with 4014.
func (s *Server) SetMessageContentAllowed(ok bool) {
	s.gw.mu.Lock()
	s.gw.contentAllowed = ok
	s.gw.mu.Unlock()
}

// CloseOnIdentify makes every later IDENTIFY be answered by closing the
// connection with code (0: answer normally).
func (s *Server) CloseOnIdentify(code int) {
	s.gw.mu.Lock()
	s.gw.closeOnIdentify = code
	s.gw.mu.Unlock()
}

// FailResumes makes every later RESUME be answered by closing the
// connection with 4000.
func (s *Server) FailResumes(fail bool) {
	s.gw.mu.Lock()
	s.gw.failResumes = fail
	s.gw.mu.Unlock()
}

// RefuseConnections makes the gateway answer upgrades with 503.
func (s *Server) RefuseConnections(refuse bool) {
	s.gw.mu.Lock()
	s.gw.refuse = refuse
	s.gw.mu.Unlock()
}

// Disconnect closes the current connection with code; the session stays
// resumable.
func (s *Server) Disconnect(code int) {
	s.gw.mu.Lock()
	c := s.gw.cur
	s.gw.cur = nil
	s.gw.mu.Unlock()
	if c != nil {
		c.close(code, "Closed by the test.")
	}
}

// Zombie turns the current connection into a zombie: it stays open but
// acknowledges no heartbeat and delivers no event (events dispatched
// meanwhile are lost in it, and replayed when the session resumes).
func (s *Server) Zombie() {
	s.gw.mu.Lock()
	c := s.gw.cur
	s.gw.mu.Unlock()
	if c != nil {
		c.wmu.Lock()
		c.acks, c.zombie = false, true
		c.wmu.Unlock()
	}
}

// Connected reports whether a connection is ready for events.
func (s *Server) Connected() bool {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.cur != nil
}

// Identifies returns the IDENTIFYs received.
func (s *Server) Identifies() []Identify {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return append([]Identify(nil), s.gw.identifies...)
}

// Resumes counts the RESUMEs received.
func (s *Server) Resumes() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.resumes
}

// Connections counts the websocket connections accepted.
func (s *Server) Connections() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.connections
}

// Heartbeats counts the heartbeats received.
func (s *Server) Heartbeats() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.heartbeats
}

// Dispatch sends the event typ with data d to the client, waiting up to
// 10s for a connection ready for events. The event gets the session's
// next sequence number and is kept for replay on resume.
func (s *Server) Dispatch(tb testing.TB, typ string, d any) {
	tb.Helper()
	s.WaitFor(tb, "a gateway connection ready for "+typ, s.Connected)
	s.gw.mu.Lock()
	c := s.gw.cur
	s.gw.seq++
	frame := payload(opDispatch, typ, s.gw.seq, d)
	s.gw.log = append(s.gw.log, loggedEvent{seq: s.gw.seq, frame: frame})
	s.gw.mu.Unlock()
	if c != nil {
		// A failed write is like a connection lost in transit: the event
		// is replayed when the client resumes.
		_ = c.write(frame)
	}
}

// SendRaw writes frame to the current connection as it is, without a
// sequence number (for malformed payloads).
func (s *Server) SendRaw(tb testing.TB, frame []byte) {
	tb.Helper()
	s.WaitFor(tb, "a gateway connection ready for a raw frame", s.Connected)
	s.gw.mu.Lock()
	c := s.gw.cur
	s.gw.mu.Unlock()
	if c != nil {
		_ = c.write(frame)
	}
}
