package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ids of the fake workspace.
const (
	BotUserID = "UBOT"
	BotID     = "BBOT"
	TeamID    = "T0TEST"
)

// Call is one Web API request the server received.
type Call struct {
	Method string
	Params url.Values
	At     time.Time
}

// Post is a message the bot sent with chat.postMessage.
type Post struct {
	Channel  string
	TS       string
	ThreadTS string
	Text     string
	At       time.Time
}

// Ephemeral is an answer only one user sees: chat.postEphemeral or a POST
// to a slash command's response_url (then Channel and User are empty and
// ResponseURL is set).
type Ephemeral struct {
	Channel, User, Text string
	ResponseType        string
	ResponseURL         string
	At                  time.Time
}

// Failure is an answer the server gives to one call of a method instead
// of the normal one: an HTTP status (429 with RetryAfter seconds, 500) or
// ok:false with Error (and Needed, for missing_scope).
type Failure struct {
	Status     int
	RetryAfter int
	Error      string
	Needed     string
}

// Message is one message of a channel as conversations.replies returns it.
type Message struct {
	Channel  string `json:"-"`
	TS       string `json:"ts"`
	ThreadTS string `json:"thread_ts,omitempty"`
	User     string `json:"user,omitempty"`
	BotID    string `json:"bot_id,omitempty"`
	Username string `json:"username,omitempty"`
	Text     string `json:"text"`
	Type     string `json:"type"`
}

// Options tune the fake.
type Options struct {
	// PingEvery is how often the Socket Mode connection sends a WebSocket
	// ping (default 100ms).
	PingEvery time.Duration
	// AckTimeout is how long an envelope may stay unacknowledged before it
	// is delivered again with retry_attempt+1 (default 3s, as Slack);
	// MaxRetries bounds the redeliveries (default 3).
	AckTimeout time.Duration
	MaxRetries int
	// OnPost, when set, is called with every message the bot posts, as it
	// arrives (benchmarks use it instead of polling).
	OnPost func(Post)
}

// Server is the fake Slack: Web API methods under URL and a Socket Mode
// WebSocket on the same listener.
type Server struct {
	// URL is the Web API base ("http://127.0.0.1:port/api/"), what
	// channels.slack.api_url takes.
	URL      string
	BotToken string
	AppToken string

	o   Options
	srv *httptest.Server

	mu         sync.Mutex
	calls      []Call
	posts      []Post
	ephemerals []Ephemeral
	failures   map[string][]Failure
	revoked    map[string]string // token → error code
	messages   []Message
	users      map[string]string // id → name
	bots       map[string]bool   // ids of bot users (is_bot)
	workflows  map[string]bool   // ids of workflow bot users (is_workflow_bot, is_bot false)
	nextTS     int
	nextID     int
	sock       socketState
	media      mediaState
	changed    chan struct{}
}

// New starts a fake Slack for the two tokens and stops it when the test
// ends.
func New(t testing.TB, botToken, appToken string, opts ...Options) *Server {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.PingEvery <= 0 {
		o.PingEvery = 100 * time.Millisecond
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 3 * time.Second
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 3
	}
	s := &Server{
		BotToken: botToken, AppToken: appToken, o: o,
		failures:  map[string][]Failure{},
		revoked:   map[string]string{},
		users:     map[string]string{BotUserID: "talon", UserID("alice"): "alice", UserID("bob"): "bob"},
		bots:      map[string]bool{BotUserID: true},
		workflows: map[string]bool{},
		changed:   make(chan struct{}),
	}
	s.sock.init()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/link/", s.serveLink)
	mux.HandleFunc("/respond/", s.serveResponse)
	mux.HandleFunc("/api/upload/", s.serveUpload)
	mux.HandleFunc("/files-pri/", s.serveFile)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/api/"
	t.Cleanup(s.Close)
	return s
}

// Close closes every connection and stops the server.
func (s *Server) Close() {
	s.closeSockets()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// UserID is the fake's id of test user name ("alice" → "UALICE").
func UserID(name string) string { return "U" + strings.ToUpper(name) }

// DMChannel is the id of the direct message channel between user name and the
// bot ("alice" → "DALICE").
func DMChannel(name string) string { return "D" + strings.ToUpper(name) }

// AddBot makes users.info know a bot user (is_bot), such as another
// app's.
func (s *Server) AddBot(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = name
	s.bots[id] = true
}

// AddWorkflowBot makes users.info know a workflow bot user as Slack
// describes one: is_workflow_bot, and is_bot false.
func (s *Server) AddWorkflowBot(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = name
	s.workflows[id] = true
}

// AddUser makes users.info know a user.
func (s *Server) AddUser(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = name
}

// notify wakes every waiter; the caller holds mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Fail makes the next call of method answer with f (queued, one per call).
func (s *Server) Fail(method string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f)
}

// Revoke makes every later call with token answer ok:false with code
// (invalid_auth, account_inactive, token_revoked).
func (s *Server) Revoke(token, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[token] = code
}

// Calls returns the Web API calls of method received so far ("" = all).
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Posts returns the messages the bot posted so far.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// Ephemerals returns the ephemeral answers so far.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// WaitFor blocks until cond holds (it is called again after every change
// of the server's state and may call the server's methods) or timeout
// passes; it fails the test on timeout.
func (s *Server) WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("slacktest: timed out after %s waiting for %s; calls: %s", timeout, what, s.describe())
		}
	}
}

// WaitPosts waits until at least n messages were posted and returns them.
func (s *Server) WaitPosts(t testing.TB, n int, timeout time.Duration) []Post {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d posted messages", n), timeout, func() bool { return len(s.Posts()) >= n })
	return s.Posts()
}

func (s *Server) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.calls {
		p := url.Values{}
		for k, v := range c.Params {
			if k != "token" {
				p[k] = v
			}
		}
		fmt.Fprintf(&b, "\n  %s %v", c.Method, p)
	}
	return b.String()
}

// newTS returns a fresh message timestamp; the caller holds mu.
func (s *Server) newTS() string {
	s.nextTS++
	return fmt.Sprintf("1700000000.%06d", s.nextTS)
}

// newID returns a fresh id with prefix; the caller holds mu.
func (s *Server) newID(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%06d", prefix, s.nextID)
}

// Seed stores a message in a channel (in thread threadTS, "" for none)
// without delivering any event, as if it had been written before the bot
// was there; it returns the message's ts.
func (s *Server) Seed(channel, threadTS, user, text string) string {
	return s.seed(Message{Channel: channel, ThreadTS: threadTS, User: user, Text: text})
}

// SeedBot stores a message another app posted (bot_id and username, no
// user) and returns its ts.
func (s *Server) SeedBot(channel, threadTS, botID, username, text string) string {
	return s.seed(Message{Channel: channel, ThreadTS: threadTS, BotID: botID, Username: username, Text: text})
}

// SeedViaApp stores a message user posted through an app with their own
// token: Slack stamps it with that app's botID. It returns its ts.
func (s *Server) SeedViaApp(channel, threadTS, user, botID, text string) string {
	return s.seed(Message{Channel: channel, ThreadTS: threadTS, User: user, BotID: botID, Text: text})
}

// seed stores m as a message with a fresh ts and returns the ts.
func (s *Server) seed(m Message) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.TS, m.Type = s.newTS(), "message"
	s.messages = append(s.messages, m)
	return m.TS
}

// author returns the user who wrote a stored message; the caller holds mu.
func (s *Server) author(channel, ts string) string {
	for _, m := range s.messages {
		if m.Channel == channel && m.TS == ts {
			return m.User
		}
	}
	return ""
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	params := url.Values{}
	for k, v := range r.Form {
		params[k] = v
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = params.Get("token")
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: params, At: time.Now()})
	s.notify()
	var fail *Failure
	if q := s.failures[method]; len(q) > 0 {
		fail = &q[0]
		s.failures[method] = q[1:]
	}
	code, revoked := s.revoked[token]
	s.mu.Unlock()
	if fail != nil {
		if fail.Status != 0 && fail.Status != http.StatusOK {
			if fail.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(fail.RetryAfter))
			}
			http.Error(w, http.StatusText(fail.Status), fail.Status)
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": fail.Error, "needed": fail.Needed, "provided": "chat:write"})
		return
	}
	want := s.BotToken
	if method == "apps.connections.open" {
		want = s.AppToken
	}
	switch {
	case revoked:
		writeJSON(w, map[string]any{"ok": false, "error": code})
		return
	case token == "":
		writeJSON(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	case token != want:
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://test.slack.com/", "team": "Test", "user": "talon",
			"team_id": TeamID, "user_id": BotUserID, "bot_id": BotID})
	case "apps.connections.open":
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/link/?ticket=" + s.ticket()})
	case "chat.postMessage":
		s.postMessage(w, params)
	case "chat.postEphemeral":
		s.mu.Lock()
		ts := s.newTS()
		s.ephemerals = append(s.ephemerals, Ephemeral{Channel: params.Get("channel"), User: params.Get("user"), Text: params.Get("text"), ResponseType: "ephemeral", At: time.Now()})
		s.notify()
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "message_ts": ts})
	case "reactions.add", "reactions.remove":
		writeJSON(w, map[string]any{"ok": true})
	case "conversations.replies":
		s.replies(w, params)
	case "users.info":
		s.mu.Lock()
		name, ok := s.users[params.Get("user")]
		bot := s.bots[params.Get("user")]
		workflow := s.workflows[params.Get("user")]
		s.mu.Unlock()
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "user": map[string]any{"id": params.Get("user"), "name": name, "is_bot": bot, "is_workflow_bot": workflow, "real_name": strings.ToUpper(name[:1]) + name[1:],
			"profile": map[string]any{"display_name": name, "real_name": strings.ToUpper(name[:1]) + name[1:]}}})
	default:
		if !s.mediaAPI(w, method, params) {
			writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
		}
	}
}

func (s *Server) postMessage(w http.ResponseWriter, params url.Values) {
	channel, text := params.Get("channel"), params.Get("text")
	if channel == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	if strings.TrimSpace(text) == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "no_text"})
		return
	}
	s.mu.Lock()
	ts := s.newTS()
	p := Post{Channel: channel, TS: ts, ThreadTS: params.Get("thread_ts"), Text: text, At: time.Now()}
	s.posts = append(s.posts, p)
	s.shown(channel, ts, text)
	s.messages = append(s.messages, Message{Channel: channel, TS: ts, ThreadTS: p.ThreadTS, User: BotUserID, BotID: BotID, Text: text, Type: "message"})
	s.notify()
	s.mu.Unlock()
	if s.o.OnPost != nil {
		s.o.OnPost(p)
	}
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts,
		"message": map[string]any{"type": "message", "user": BotUserID, "bot_id": BotID, "text": text, "ts": ts, "thread_ts": p.ThreadTS}})
}

// replies answers conversations.replies: the thread's parent and replies,
// oldest first, bounded by latest/oldest and limit.
func (s *Server) replies(w http.ResponseWriter, params url.Values) {
	channel, thread := params.Get("channel"), params.Get("ts")
	latest, oldest := params.Get("latest"), params.Get("oldest")
	inclusive := params.Get("inclusive") == "true" || params.Get("inclusive") == "1"
	limit, _ := strconv.Atoi(params.Get("limit"))
	if limit <= 0 {
		limit = 1000
	}
	s.mu.Lock()
	var out []Message
	for _, m := range s.messages {
		if m.Channel != channel || (m.TS != thread && m.ThreadTS != thread) {
			continue
		}
		if latest != "" && (m.TS > latest || (m.TS == latest && !inclusive)) {
			continue
		}
		if oldest != "" && (m.TS < oldest || (m.TS == oldest && !inclusive)) {
			continue
		}
		out = append(out, m)
	}
	s.mu.Unlock()
	if len(out) == 0 {
		writeJSON(w, map[string]any{"ok": false, "error": "thread_not_found"})
		return
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TS < out[j].TS })
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	writeJSON(w, map[string]any{"ok": true, "messages": out, "has_more": more})
}

// serveResponse records a POST to a slash command's response_url.
func (s *Server) serveResponse(w http.ResponseWriter, r *http.Request) {
	var m struct {
		Text         string `json:"text"`
		ResponseType string `json:"response_type"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.ephemerals = append(s.ephemerals, Ephemeral{Text: m.Text, ResponseType: m.ResponseType, ResponseURL: s.srv.URL + r.URL.Path, At: time.Now()})
	s.notify()
	s.mu.Unlock()
	w.Write([]byte("ok"))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
