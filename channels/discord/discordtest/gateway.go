package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
	// CloseInvalidShard: IDENTIFY named a shard this bot does not have.
	CloseInvalidShard = 4010
	// CloseShardingRequired: the bot has more than one shard and IDENTIFY
	// named none.
	CloseShardingRequired = 4011
	// CloseDisallowedIntents: a privileged intent not enabled for the bot.
	CloseDisallowedIntents = 4014

	// IntentMessageContent is the privileged intent to read message text.
	IntentMessageContent = 1 << 15
)

// Identify is one IDENTIFY the gateway received.
type Identify struct {
	Intents int
	// Shard is IDENTIFY's shard [id, count] ([0, 1] when it named none).
	Shard [2]int
	At    time.Time
}

// Resume is one RESUME the gateway received.
type Resume struct {
	Session string
	Seq     int64
	// Shard is the shard of the session resumed (-1: no such session, it
	// was answered with an invalid session).
	Shard int
	At    time.Time
}

// gateway is the fake's websocket side. One session per shard at a time:
// a new IDENTIFY of a shard starts that shard's new session, a RESUME of
// a shard's current session replays the events after the client's
// sequence number. A guild's events go to shard (guild_id >> 22) %
// shards, as Discord routes them; events without a guild (DMs) go to
// shard 0.
type gateway struct {
	s        *Server
	upgrader websocket.Upgrader

	mu              sync.Mutex
	heartbeat       time.Duration
	contentAllowed  bool
	closeOnIdentify int
	failResumes     bool
	refuse          bool
	offline         bool
	conns           map[*gwConn]bool
	total           int // shards of the bot
	maxConcurrency  int
	shards          map[int]*shardState
	identifies      []Identify
	resumes         []Resume
	connections     int
	heartbeats      int
}

// shardState is one shard's session.
type shardState struct {
	cur     *gwConn // the connection events go to (READY or RESUMED sent)
	session string
	seq     int64
	log     []loggedEvent
}

// shard returns shard n's state; the caller holds mu.
func (g *gateway) shard(n int) *shardState {
	st, ok := g.shards[n]
	if !ok {
		st = &shardState{}
		g.shards[n] = st
	}
	return st
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
	g.total, g.maxConcurrency = 1, 1
	g.shards = map[int]*shardState{}
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
		for _, st := range g.shards {
			if st.cur == c {
				st.cur = nil
			}
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
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				// Discord ends a session its client closes normally: it
				// cannot be resumed.
				g.mu.Lock()
				for _, st := range g.shards {
					if st.cur == c {
						st.session = ""
					}
				}
				g.mu.Unlock()
			}
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
		Token   string  `json:"token"`
		Intents int     `json:"intents"`
		Shard   *[2]int `json:"shard"`
	}
	_ = json.Unmarshal(raw, &d)
	shard := [2]int{0, 1}
	if d.Shard != nil {
		shard = *d.Shard
	}
	g.mu.Lock()
	g.identifies = append(g.identifies, Identify{Intents: d.Intents, Shard: shard, At: time.Now()})
	closeCode, content, total := g.closeOnIdentify, g.contentAllowed, g.total
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
	case d.Shard == nil && total > 1:
		c.close(CloseShardingRequired, "Sharding required.")
		return false
	case shard[1] != total || shard[0] < 0 || shard[0] >= total:
		c.close(CloseInvalidShard, "Invalid shard.")
		return false
	}
	session := g.s.newID()
	wsURL := g.s.wsURL()
	g.mu.Lock()
	st := g.shard(shard[0])
	st.cur = nil // until READY is out
	st.session = session
	st.seq = 1
	st.log = nil
	d2 := map[string]any{
		"v": 9, "user": g.s.Bot, "guilds": []any{}, "session_id": st.session,
		"resume_gateway_url": wsURL, "application": map[string]any{"id": g.s.AppID, "flags": 1 << 19},
	}
	if g.s.ReadyWithoutApplication.Load() {
		delete(d2, "application")
	}
	if d.Shard != nil {
		d2["shard"] = shard
	}
	ready := payload(opDispatch, "READY", st.seq, d2)
	g.mu.Unlock()
	if c.write(ready) != nil {
		return false
	}
	// Events go to the connection only once READY is out.
	g.mu.Lock()
	if st.session == session {
		st.cur = c
	}
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
	var st *shardState
	shard := -1
	for n, s := range g.shards {
		if s.session != "" && s.session == d.Session {
			st, shard = s, n
		}
	}
	g.resumes = append(g.resumes, Resume{Session: d.Session, Seq: d.Seq, Shard: shard, At: time.Now()})
	fail := g.failResumes
	g.mu.Unlock()
	g.s.changedLocked()
	switch {
	case strings.TrimPrefix(d.Token, "Bot ") != g.s.Token:
		c.close(CloseAuthenticationFailed, "Authentication failed.")
		return false
	case fail:
		c.close(CloseUnknownError, "Unknown error.")
		return false
	case st == nil:
		return c.write(payload(opInvalidSession, "", 0, false)) == nil
	}
	g.mu.Lock()
	if st.cur != nil && st.cur != c {
		// Discord ends the session's other connection when it is resumed.
		old := st.cur
		defer func() { _ = old.ws.Close() }()
	}
	st.cur = nil // until RESUMED is out
	var replay [][]byte
	for _, e := range st.log {
		if e.seq > d.Seq {
			replay = append(replay, e.frame)
		}
	}
	st.seq++
	resumed := payload(opDispatch, "RESUMED", st.seq, map[string]any{})
	st.log = append(st.log, loggedEvent{seq: st.seq, frame: resumed})
	session := st.session
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
	if st.session == session {
		st.cur = c
	}
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

// Disconnect closes the current connection of every shard with code;
// the sessions stay resumable.
func (s *Server) Disconnect(code int) {
	s.gw.mu.Lock()
	var conns []*gwConn
	for _, st := range s.gw.shards {
		if st.cur != nil {
			conns = append(conns, st.cur)
			st.cur = nil
		}
	}
	s.gw.mu.Unlock()
	for _, c := range conns {
		c.close(code, "Closed by the test.")
	}
}

// Zombie turns the current connection into a zombie: it stays open but
// acknowledges no heartbeat and delivers no event (events dispatched
// meanwhile are lost in it, and replayed when the session resumes).
func (s *Server) Zombie() {
	s.gw.mu.Lock()
	c := s.gw.shard(0).cur
	s.gw.mu.Unlock()
	if c != nil {
		c.wmu.Lock()
		c.acks, c.zombie = false, true
		c.wmu.Unlock()
	}
}

// Connected reports whether every shard has a connection ready for
// events.
func (s *Server) Connected() bool {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	for n := 0; n < s.gw.total; n++ {
		if s.gw.shard(n).cur == nil {
			return false
		}
	}
	return true
}

// ShardConnected reports whether shard n has a connection ready for
// events.
func (s *Server) ShardConnected(n int) bool {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.shard(n).cur != nil
}

// ShardSession is shard n's current session id and last sequence number
// ("" before its first IDENTIFY).
func (s *Server) ShardSession(n int) (string, int64) {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	st := s.gw.shard(n)
	return st.session, st.seq
}

// SetShards makes the bot have total shards (default 1): GET /gateway/bot
// recommends total and reports maxConcurrency as its
// session_start_limit.max_concurrency; an IDENTIFY must then name a shard
// of total (else close code 4010, or 4011 when it names none and total
// is more than 1).
func (s *Server) SetShards(total, maxConcurrency int) {
	s.gw.mu.Lock()
	s.gw.total, s.gw.maxConcurrency = max(total, 1), max(maxConcurrency, 1)
	s.gw.mu.Unlock()
}

// ShardOf is the shard Discord sends guild's events to: (guild_id >> 22)
// % shards; 0 for no guild (DMs).
func (s *Server) ShardOf(guild string) int {
	s.gw.mu.Lock()
	total := s.gw.total
	s.gw.mu.Unlock()
	id, err := strconv.ParseUint(guild, 10, 64)
	if guild == "" || err != nil {
		return 0
	}
	return int((id >> 22) % uint64(total))
}

// GuildOnShard returns a fresh guild id whose events go to shard n.
func (s *Server) GuildOnShard(n int) string {
	s.gw.mu.Lock()
	total := uint64(s.gw.total)
	s.gw.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := uint64(s.next)>>22 + 1
	for t%total != uint64(n)%total {
		t++
	}
	s.next = int64(t << 22)
	return strconv.FormatInt(s.next, 10)
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
	return len(s.gw.resumes)
}

// ResumeLog returns the RESUMEs received, in order.
func (s *Server) ResumeLog() []Resume {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return append([]Resume(nil), s.gw.resumes...)
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

// Dispatch sends the event typ with data d to the client on the shard of
// d's guild_id (shard 0 without one), waiting up to 30s for that shard's
// connection to be ready for events. The event gets the shard session's
// next sequence number and is kept for replay on resume.
func (s *Server) Dispatch(tb testing.TB, typ string, d any) {
	tb.Helper()
	var g struct {
		GuildID string `json:"guild_id"`
	}
	if raw, err := json.Marshal(d); err == nil {
		_ = json.Unmarshal(raw, &g)
	}
	n := s.ShardOf(g.GuildID)
	s.gw.mu.Lock()
	offline := s.gw.offline
	s.gw.mu.Unlock()
	if !offline {
		s.WaitFor(tb, fmt.Sprintf("a gateway connection of shard %d ready for %s", n, typ), func() bool { return s.ShardConnected(n) })
	}
	s.gw.mu.Lock()
	st := s.gw.shard(n)
	c := st.cur
	st.seq++
	frame := payload(opDispatch, typ, st.seq, d)
	st.log = append(st.log, loggedEvent{seq: st.seq, frame: frame})
	s.gw.mu.Unlock()
	if c != nil {
		// A failed write is like a connection lost in transit: the event
		// is replayed when the client resumes.
		_ = c.write(frame)
	}
}

// DispatchOffline makes Dispatch keep an event for its shard's session
// without waiting for a connection (on: events sent while no client is
// connected, replayed by a RESUME of the session).
func (s *Server) DispatchOffline(on bool) {
	s.gw.mu.Lock()
	s.gw.offline = on
	s.gw.mu.Unlock()
}

// SendRaw writes frame to the current connection as it is, without a
// sequence number (for malformed payloads).
func (s *Server) SendRaw(tb testing.TB, frame []byte) {
	tb.Helper()
	s.WaitFor(tb, "a gateway connection ready for a raw frame", func() bool { return s.ShardConnected(0) })
	s.gw.mu.Lock()
	c := s.gw.shard(0).cur
	s.gw.mu.Unlock()
	if c != nil {
		_ = c.write(frame)
	}
}
