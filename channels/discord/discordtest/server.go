package discordtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// User is a Discord user of the fake.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot,omitempty"`
}

// Channel types the fake knows.
const (
	ChannelText   = 0
	ChannelDM     = 1
	ChannelThread = 11 // a public thread
)

// channel is one channel of the fake.
type channel struct {
	ID       string `json:"id"`
	Type     int    `json:"type"`
	GuildID  string `json:"guild_id,omitempty"`
	ParentID string `json:"parent_id,omitempty"`
}

// message is a message the fake knows (sent by a user or by the bot).
type message struct {
	ID        string
	ChannelID string
	Author    User
	Content   string
}

// Sent is a message the bot sent.
type Sent struct {
	ID        string
	ChannelID string
	Content   string
	// ReplyTo is message_reference.message_id ("" when not a reply).
	ReplyTo string
	// AllowedMentions is the allowed_mentions object as sent (nil when
	// absent).
	AllowedMentions *AllowedMentions
	// Via is "channel" (POST /channels/{id}/messages), "original" (the
	// edited deferred answer of an interaction) or "followup".
	Via string
	// Interaction is the interaction id of an "original" or "followup".
	Interaction string
	// Flags are the message's flags as Discord shows it (64: only the
	// user sees it): a "followup" has the flags it was sent with, the
	// "original" those of the interaction's deferred response, which an
	// edit does not change.
	Flags int
	At    time.Time
}

// AllowedMentions is Discord's allowed_mentions object.
type AllowedMentions struct {
	Parse       []string `json:"parse"`
	Users       []string `json:"users"`
	Roles       []string `json:"roles"`
	RepliedUser bool     `json:"replied_user"`
}

// Call is one REST request the fake received.
type Call struct {
	Method, Path string
	At           time.Time
}

// Callback is an interaction response the bot posted.
type Callback struct {
	Interaction string
	Type        int
	// Flags of the response data (64: only the user sees it).
	Flags   int
	Content string
	At      time.Time
}

// Reaction is a reaction the bot put on or took off a message.
type Reaction struct {
	ChannelID, MessageID, Emoji string
	Removed                     bool
}

// failure is an injected REST error.
type failure struct {
	method, path string
	status, left int
	retryAfter   time.Duration // a 429's retry_after
	// after: the call is served, and then its answer replaced by status
	// (the response lost on the way back).
	after bool
	// code is Discord's JSON error code of a refusal (Refuse).
	code int
}

// interaction is an interaction the fake dispatched.
type interaction struct {
	id, token  string
	channelID  string
	at         time.Time
	responded  bool
	flags      int // of the callback
	expired    bool
	originalID string
}

// Server is the fake Discord.
type Server struct {
	// URL is the REST and discovery root, the channel's api_url.
	URL   string
	Token string
	AppID string
	// Bot is the bot's own user (READY's user).
	Bot User
	// ReadyWithoutApplication leaves the application object out of
	// READY, as a gateway in front of Discord may.
	ReadyWithoutApplication atomic.Bool

	srv *httptest.Server
	gw  gateway

	mu           sync.Mutex
	next         int64
	users        map[string]User
	channels     map[string]channel
	dms          map[string]string // user id → DM channel id
	closedDMs    map[string]bool   // DM channel ids whose user takes no DMs from the bot
	messages     map[string]message
	botRoles     map[string]string         // guild id → the bot's managed role there
	nonces       map[string]map[string]any // channel|nonce → the message sent
	sent         []Sent
	calls        []Call
	callbacks    []Callback
	reactions    []Reaction
	typing       []string
	failures     []failure
	interactions map[string]*interaction
	commands     map[string]map[string]json.RawMessage // scope ("" global, else guild id) → name → command
	cmdWrites    int
	onSent       func(Sent)
	media        mediaState
	realGateway  bool
	changed      chan struct{}
}

// New starts a fake Discord whose bot has token and stops it when the
// test ends.
func New(tb testing.TB, token string) *Server {
	s := &Server{
		Token:        token,
		next:         1_100_000_000_000_000_000,
		users:        map[string]User{},
		channels:     map[string]channel{},
		dms:          map[string]string{},
		closedDMs:    map[string]bool{},
		messages:     map[string]message{},
		botRoles:     map[string]string{},
		nonces:       map[string]map[string]any{},
		interactions: map[string]*interaction{},
		commands:     map[string]map[string]json.RawMessage{},
		changed:      make(chan struct{}),
	}
	s.AppID = s.id()
	s.Bot = User{ID: s.AppID, Username: "talon", Bot: true}
	s.gw.init(s)
	s.srv = httptest.NewServer(s.routes())
	s.URL = s.srv.URL
	tb.Cleanup(s.Close)
	return s
}

// Close drops the gateway connections and stops the server.
func (s *Server) Close() {
	s.gw.closeAll()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// id returns a fresh snowflake; the caller may hold mu.
func (s *Server) id() string {
	s.next++
	return strconv.FormatInt(s.next, 10)
}

func (s *Server) newID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id()
}

// notify wakes every waiter; the caller holds mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// WaitFor polls cond (called without the server's lock) until it holds,
// waking on every change of the fake; it fails the test after 30s.
func (s *Server) WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(30 * time.Second)
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
		case <-time.After(20 * time.Millisecond):
		case <-deadline.C:
			tb.Fatalf("timed out after 10s waiting for %s", what)
		}
	}
}

// OnSent calls f with every message the bot sends (from the server's
// handler goroutine; f must not block).
func (s *Server) OnSent(f func(Sent)) {
	s.mu.Lock()
	s.onSent = f
	s.mu.Unlock()
}

// User returns the user called name, the same one every time.
func (s *Server) User(name string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.users[name]; ok {
		return u
	}
	u := User{ID: s.id(), Username: name}
	s.users[name] = u
	return u
}

// BotUser returns another bot called name.
func (s *Server) BotUser(name string) User {
	u := s.User(name)
	u.Bot = true
	return u
}

// Guild returns a fresh guild id.
func (s *Server) Guild() string { return s.newID() }

// TextChannel makes a text channel in guild and returns its id.
func (s *Server) TextChannel(guild string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := channel{ID: s.id(), Type: ChannelText, GuildID: guild}
	s.channels[c.ID] = c
	return c.ID
}

// Thread makes a public thread under the channel parent of guild and
// returns its id.
func (s *Server) Thread(guild, parent string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := channel{ID: s.id(), Type: ChannelThread, GuildID: guild, ParentID: parent}
	s.channels[c.ID] = c
	return c.ID
}

// DM returns the id of the direct-message channel of u and the bot.
func (s *Server) DM(u User) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dmLocked(u.ID)
}

func (s *Server) dmLocked(user string) string {
	if id, ok := s.dms[user]; ok {
		return id
	}
	c := channel{ID: s.id(), Type: ChannelDM}
	s.channels[c.ID] = c
	s.dms[user] = c.ID
	return c.ID
}

// CloseDMs makes u take no direct messages from the bot, as a user who
// turned off "direct messages from server members": the bot may open the
// channel, but a message to it is refused (403, code 50007).
func (s *Server) CloseDMs(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closedDMs[s.dmLocked(u.ID)] = true
}

// openDM answers POST /users/@me/channels: the DM channel with a known
// user, the same one every time.
func (s *Server) openDM(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RecipientID string `json:"recipient_id"`
	}
	if err := decode(r, &body); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	s.mu.Lock()
	var u User
	ok := false
	for _, known := range s.users {
		if known.ID == body.RecipientID {
			u, ok = known, true
		}
	}
	var id string
	if ok {
		id = s.dmLocked(u.ID)
	}
	s.mu.Unlock()
	if !ok {
		reply(w, 400, apiError{Message: "Invalid Recipient(s)", Code: 50033})
		return
	}
	reply(w, 200, map[string]any{"id": id, "type": ChannelDM, "recipients": []User{u}})
}

// Fail makes the next n REST calls of method whose path contains path
// answer with status.
func (s *Server) Fail(method, path string, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{method: method, path: path, status: status, left: n})
}

// Refuse makes the next n REST calls of method whose path contains path
// answer as Discord does with JSON error code code: 50001 (403 Missing
// Access: the bot cannot see the channel, or is not in the guild or was
// invited without the applications.commands scope), 50013 (403 Missing
// Permissions), 10014 (400 Unknown Emoji), 10003 (404 Unknown Channel: the
// channel was deleted) or 50007 (403: the user closed their DMs to the
// bot, or left every server it shares with them).
func (s *Server) Refuse(method, path string, code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := refusals[code]
	if !ok {
		r = refusal{http.StatusBadRequest, "refused"}
	}
	s.failures = append(s.failures, failure{method: method, path: path, status: r.status, left: n, code: code})
}

// LoseResponses makes the next n REST calls of method whose path contains
// path take effect and then answer 502, as when the response is lost on
// the way back (a proxy times out): a client that tries again may do the
// same thing twice.
func (s *Server) LoseResponses(method, path string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{method: method, path: path, status: http.StatusBadGateway, left: n, after: true})
}

// RateLimit makes the next n REST calls of method whose path contains
// path answer 429 with retry_after after, as Discord does when a route's
// limit is used up (discordgo waits that long and tries again).
func (s *Server) RateLimit(method, path string, after time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{method: method, path: path, status: http.StatusTooManyRequests, left: n, retryAfter: after})
}

// ExpireInteraction makes the token of interaction id invalid, as Discord
// does 15 minutes after the interaction.
func (s *Server) ExpireInteraction(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.interactions[id]; ok {
		in.expired = true
	}
}

// Sent returns the messages the bot sent, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Calls returns the REST calls received, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Callbacks returns the interaction responses received.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// Reactions returns the reactions the bot put on and took off messages.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// Typing returns the channels the bot sent a typing indicator to.
func (s *Server) Typing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.typing...)
}

// Commands returns the application commands registered in scope ("" for
// global, else a guild id) by name, as the bot sent them.
func (s *Server) Commands(scope string) map[string]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]json.RawMessage{}
	for k, v := range s.commands[scope] {
		out[k] = v
	}
	return out
}

// CommandWrites counts the application commands created, edited or
// deleted so far.
func (s *Server) CommandWrites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmdWrites
}

// routes is the REST API.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	const api = "/api/v9"
	mux.HandleFunc("GET /gateway", s.gw.serve)
	mux.HandleFunc("GET /gateway/", s.gw.serve)
	mux.HandleFunc("GET /{$}", s.gw.serve) // where Discord's own gateway URL points after the rewrite
	mux.HandleFunc("GET "+api+"/gateway", s.discovery)
	mux.HandleFunc("GET "+api+"/gateway/bot", s.authed(s.discoveryBot))
	mux.HandleFunc("GET "+api+"/users/@me", s.authed(func(w http.ResponseWriter, _ *http.Request) { reply(w, 200, s.Bot) }))
	mux.HandleFunc("GET "+api+"/oauth2/applications/@me", s.authed(func(w http.ResponseWriter, _ *http.Request) {
		// The application's flags show the Message Content intent as
		// the developer portal sets it (GATEWAY_MESSAGE_CONTENT_LIMITED,
		// 1<<19, for a bot in under 100 servers).
		flags := 0
		s.gw.mu.Lock()
		if s.gw.contentAllowed {
			flags |= 1 << 19
		}
		s.gw.mu.Unlock()
		reply(w, 200, map[string]any{"id": s.AppID, "name": s.Bot.Username, "bot": s.Bot, "flags": flags})
	}))
	mux.HandleFunc("GET "+api+"/channels/{id}", s.authed(s.getChannel))
	mux.HandleFunc("GET "+api+"/guilds/{id}/roles", s.authed(s.guildRoles))
	mux.HandleFunc("POST "+api+"/channels/{id}/messages", s.authed(s.postMessage))
	mux.HandleFunc("POST "+api+"/users/@me/channels", s.authed(s.openDM))
	mux.HandleFunc("POST "+api+"/channels/{id}/typing", s.authed(s.postTyping))
	mux.HandleFunc("PATCH "+api+"/channels/{id}/messages/{mid}", s.authed(s.editMessage))
	mux.HandleFunc("DELETE "+api+"/channels/{id}/messages/{mid}", s.authed(s.deleteMessage))
	mux.HandleFunc("GET /attachments/{aid}/{name}", s.serveAttachment)
	mux.HandleFunc("GET /stickers/{file}", s.serveSticker)
	mux.HandleFunc("PUT "+api+"/channels/{id}/messages/{mid}/reactions/{emoji}/{who}", s.authed(s.reaction(false)))
	mux.HandleFunc("DELETE "+api+"/channels/{id}/messages/{mid}/reactions/{emoji}/{who}", s.authed(s.reaction(true)))
	for _, scope := range []string{api + "/applications/{app}/commands", api + "/applications/{app}/guilds/{guild}/commands"} {
		mux.HandleFunc("GET "+scope, s.authed(s.listCommands))
		mux.HandleFunc("POST "+scope, s.authed(s.createCommand))
		mux.HandleFunc("PATCH "+scope+"/{cmd}", s.authed(s.editCommand))
		mux.HandleFunc("DELETE "+scope+"/{cmd}", s.authed(s.deleteCommand))
	}
	mux.HandleFunc("POST "+api+"/interactions/{id}/{token}/callback", s.callback)
	mux.HandleFunc("PATCH "+api+"/webhooks/{app}/{token}/messages/{mid}", s.editOriginal)
	mux.HandleFunc("POST "+api+"/webhooks/{app}/{token}", s.followup)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/gateway") && r.URL.Path != "/" {
			if f, ok := s.record(r); ok {
				if f.after {
					mux.ServeHTTP(httptest.NewRecorder(), r)
					reply(w, f.status, apiError{Message: "502: Bad Gateway", Code: 0})
					return
				}
				if f.status == http.StatusTooManyRequests {
					w.Header().Set("Retry-After", strconv.Itoa(int(f.retryAfter.Seconds()+0.999)))
					reply(w, f.status, map[string]any{"message": "You are being rate limited.", "retry_after": f.retryAfter.Seconds(), "global": false})
					return
				}
				if f.code != 0 {
					reply(w, f.status, apiError{Message: refusals[f.code].msg, Code: f.code})
					return
				}
				reply(w, f.status, apiError{Message: "injected failure", Code: 0})
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// record logs a call and reports an injected failure for it.
func (s *Server) record(r *http.Request) (failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, At: time.Now()})
	for i := range s.failures {
		f := &s.failures[i]
		if f.left > 0 && f.method == r.Method && strings.Contains(r.URL.Path, f.path) {
			f.left--
			return *f, true
		}
	}
	return failure{}, false
}

// refusal is how Discord answers with one JSON error code.
type refusal struct {
	status int
	msg    string
}

// refusals are the JSON error codes Refuse knows.
var refusals = map[int]refusal{
	50001: {http.StatusForbidden, "Missing Access"},
	50013: {http.StatusForbidden, "Missing Permissions"},
	10014: {http.StatusBadRequest, "Unknown Emoji"},
	10003: {http.StatusNotFound, "Unknown Channel"},
	50007: {http.StatusForbidden, "Cannot send messages to this user"},
}

type apiError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authed requires the bot token, as Discord does: "Bot <token>".
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bot "+s.Token {
			reply(w, http.StatusUnauthorized, apiError{Message: "401: Unauthorized", Code: 0})
			return
		}
		h(w, r)
	}
}

func (s *Server) wsURL() string {
	s.mu.Lock()
	real := s.realGateway
	s.mu.Unlock()
	if real {
		return "wss://gateway.discord.gg"
	}
	return "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway"
}

// AdvertiseDiscordGateway makes gateway discovery answer with Discord's
// own gateway URL, as a server that copies Discord's answers would; the
// websocket is served at / as well.
func (s *Server) AdvertiseDiscordGateway() {
	s.mu.Lock()
	s.realGateway = true
	s.mu.Unlock()
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request) {
	reply(w, 200, map[string]string{"url": s.wsURL()})
}

func (s *Server) discoveryBot(w http.ResponseWriter, _ *http.Request) {
	s.gw.mu.Lock()
	total, conc := s.gw.total, s.gw.maxConcurrency
	s.gw.mu.Unlock()
	reply(w, 200, map[string]any{"url": s.wsURL(), "shards": total,
		"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": conc}})
}
