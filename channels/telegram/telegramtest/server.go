package telegramtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/textfmt"
)

// Call is one API request the server received.
type Call struct {
	Method string
	Params map[string]string
	// ContentType is the media type the parameters came in
	// (multipart/form-data, application/json, …; "" for none).
	ContentType string
	At          time.Time
}

// Sent is a message the bot sent with sendMessage.
type Sent struct {
	MessageID int
	ChatID    int64
	ThreadID  int
	Text      string
	ParseMode string
	// ReplyTo is reply_parameters.message_id (0 when not a reply).
	ReplyTo int
	At      time.Time
}

// Failure is an error the server answers a method with, once.
type Failure struct {
	Code        int
	Description string
	RetryAfter  int
	// MigrateToChatID, with Code 400, is Telegram's answer to a group
	// that became a supergroup: the new chat id.
	MigrateToChatID int64
}

// Server is the fake Bot API.
type Server struct {
	URL   string
	Token string
	// Bot is what getMe returns.
	Bot models.User

	srv *httptest.Server

	mu         sync.Mutex
	updates    []models.Update
	nextUpdate int64
	nextMsg    int
	confirmed  int64 // the highest offset a getUpdates asked for
	polling    bool
	calls      []Call
	forget     bool // calls are not kept (Forget)
	sent       []Sent
	failures   map[string][]Failure
	held       map[string]chan struct{} // Hold: closed on release
	media      mediaState
	webhookURL string
	webhookSec string
	changed    chan struct{} // closed and replaced on every state change
}

// New starts a fake server for token and stops it when the test ends.
func New(t testing.TB, token string) *Server {
	id, _ := strconv.ParseInt(strings.Split(token, ":")[0], 10, 64)
	s := &Server{
		Token:      token,
		Bot:        models.User{ID: id, IsBot: true, FirstName: "Talon", Username: "talon_bot"},
		nextUpdate: 1000,
		nextMsg:    5000,
		failures:   map[string][]Failure{},
		changed:    make(chan struct{}),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Stop stops the server at once, cutting the requests in flight (a long
// poll included), like an outage of the platform.
func (s *Server) Stop() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// notify wakes every waiter; the caller holds mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// AddUpdate queues an update for getUpdates and returns its update_id.
func (s *Server) AddUpdate(u models.Update) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpdate++
	u.ID = s.nextUpdate
	s.updates = append(s.updates, u)
	s.notify()
	return u.ID
}

// NextMessageID reserves a message id for an inbound message.
func (s *Server) NextMessageID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg++
	return s.nextMsg
}

// Fail makes the next call of method answer with f (queued, one per call).
func (s *Server) Fail(method string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f)
}

// Hold makes the calls of method wait, once recorded, until release is
// called (a Bot API slow to answer that method).
func (s *Server) Hold(method string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]chan struct{}{}
	}
	s.held[method] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.held, method)
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns the calls of method received so far ("" = all).
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

// Forget stops keeping the calls that arrive from now on: they are
// answered as before, but Calls (and WaitFor's calls) no longer see them;
// the messages sent are still kept (Sent). A load test calls it so that
// thousands of retained calls do not fill its process's heap, where they
// would lengthen every garbage collection of the gateway running beside
// them.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget = true
}

// Sent returns the messages sent so far.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// SentCount returns how many messages were sent so far (without copying
// them, for a load test's polling).
func (s *Server) SentCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// Confirmed returns the highest offset a getUpdates call has asked for:
// every update below it is acknowledged.
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Webhook returns the URL and secret of the last setWebhook.
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhookURL, s.webhookSec
}

// WaitFor blocks until cond (called with copies of the sent messages
// and calls; it may call the server's methods) holds or the timeout passes; it fails the test
// on timeout.
func (s *Server) WaitFor(t testing.TB, what string, timeout time.Duration, cond func(sent []Sent, calls []Call) bool) {
	t.Helper()
	s.wait(t, what, timeout, func() bool {
		s.mu.Lock()
		sent, calls := append([]Sent(nil), s.sent...), append([]Call(nil), s.calls...)
		s.mu.Unlock()
		return cond(sent, calls)
	})
}

// WaitSent waits until at least n messages were sent and returns them.
// It counts them without copying until they are there (a benchmark's
// wait must not cost in proportion to everything sent so far).
func (s *Server) WaitSent(t testing.TB, n int, timeout time.Duration) []Sent {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d sent messages", n), timeout, func() bool { return s.SentCount() >= n })
	return s.Sent()
}

// wait blocks until check holds or the timeout passes, looking again
// whenever the server records something; it fails the test on timeout.
func (s *Server) wait(t testing.TB, what string, timeout time.Duration, check func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// check may read state the server changes after it signals (the
	// webhook it records after the call): look again now and then too.
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		// The signal is taken before looking, so a change made after the
		// look wakes this wait.
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if check() {
			return
		}
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("telegramtest: timed out after %s waiting for %s; calls: %s", timeout, what, s.describe())
		}
	}
}

func (s *Server) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.calls {
		if c.Method != "getUpdates" {
			fmt.Fprintf(&b, "\n  %s %v", c.Method, c.Params)
		}
	}
	return b.String()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/") {
		s.serveFile(w, r)
		return
	}
	prefix := "/bot" + s.Token + "/"
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !strings.HasPrefix(r.URL.Path, prefix) {
		writeErr(w, Failure{Code: 401, Description: "Unauthorized"})
		return
	}
	method := strings.TrimPrefix(r.URL.Path, prefix)
	params, err := parseParams(r)
	if err != nil {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	s.mu.Lock()
	if !s.forget {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		s.calls = append(s.calls, Call{Method: method, Params: params, ContentType: ct, At: time.Now()})
	}
	s.notify()
	if ch := s.held[method]; ch != nil {
		s.mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
		s.mu.Lock()
	}
	var fail *Failure
	if q := s.failures[method]; len(q) > 0 {
		fail = &q[0]
		s.failures[method] = q[1:]
	}
	s.mu.Unlock()
	if fail != nil {
		writeErr(w, *fail)
		return
	}
	switch method {
	case "getMe":
		writeOK(w, s.Bot)
	case "getUpdates":
		s.getUpdates(w, r, params)
	case "sendMessage":
		s.sendMessage(w, params)
	case "editMessageText":
		s.editMessageText(w, params)
	case "deleteMessage":
		s.deleteMessage(w, params)
	case "sendMessageDraft":
		s.sendMessageDraft(w, params)
	case "sendPhoto", "sendDocument":
		s.sendFile(w, r, method, params)
	case "getFile":
		s.getFile(w, params)
	case "setMessageReaction", "sendChatAction", "setMyCommands", "deleteMyCommands", "answerCallbackQuery":
		writeOK(w, true)
	case "setWebhook":
		s.mu.Lock()
		s.webhookURL, s.webhookSec = params["url"], params["secret_token"]
		s.mu.Unlock()
		writeOK(w, true)
	case "deleteWebhook":
		s.mu.Lock()
		s.webhookURL, s.webhookSec = "", ""
		s.mu.Unlock()
		writeOK(w, true)
	default:
		writeErr(w, Failure{Code: 404, Description: "Not Found: method " + method + " is not faked"})
	}
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]string) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	s.mu.Lock()
	if s.webhookURL != "" {
		s.mu.Unlock()
		writeErr(w, Failure{Code: 409, Description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
		return
	}
	if s.polling {
		s.mu.Unlock()
		writeErr(w, Failure{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
		return
	}
	s.polling = true
	defer func() {
		s.mu.Lock()
		s.polling = false
		s.mu.Unlock()
	}()
	if offset > s.confirmed {
		s.confirmed = offset
		kept := s.updates[:0]
		for _, u := range s.updates {
			if u.ID >= offset {
				kept = append(kept, u)
			}
		}
		s.updates = kept
	}
	s.mu.Unlock()
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var out []models.Update
		for _, u := range s.updates {
			if u.ID >= offset {
				out = append(out, u)
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if len(out) > 0 || timeout <= 0 {
			if out == nil {
				out = []models.Update{}
			}
			writeOK(w, out)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			writeOK(w, []models.Update{})
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) sendMessage(w http.ResponseWriter, p map[string]string) {
	chatID, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: chat not found"})
		return
	}
	text := p["text"]
	visible := text
	if strings.EqualFold(p["parse_mode"], "HTML") {
		if err := textfmt.ValidateTelegramHTML(text); err != nil {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: can't parse entities: " + err.Error()})
			return
		}
		visible = textfmt.HTMLToPlain(text)
	}
	if strings.TrimSpace(visible) == "" {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message text is empty"})
		return
	}
	if textfmt.Len(visible) > 4096 {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message is too long"})
		return
	}
	thread, _ := strconv.Atoi(p["message_thread_id"])
	var rp struct {
		MessageID int `json:"message_id"`
	}
	if v := p["reply_parameters"]; v != "" {
		if err := json.Unmarshal([]byte(v), &rp); err != nil {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: can't parse reply parameters JSON object"})
			return
		}
	}
	s.mu.Lock()
	s.nextMsg++
	m := Sent{MessageID: s.nextMsg, ChatID: chatID, ThreadID: thread, Text: text, ParseMode: p["parse_mode"], ReplyTo: rp.MessageID, At: time.Now()}
	s.sent = append(s.sent, m)
	s.media.shown(chatID, m.MessageID, text)
	s.notify()
	bot := s.Bot
	s.mu.Unlock()
	writeOK(w, models.Message{
		ID: m.MessageID, MessageThreadID: thread, From: &bot, Date: int(time.Now().Unix()),
		Chat: models.Chat{ID: chatID, Type: "private"}, Text: visible,
	})
}

// parseParams reads multipart, url-encoded or JSON parameters into
// strings (JSON objects and arrays stay JSON text, as in a form).
func parseParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range r.URL.Query() {
		out[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) == 0 {
			return out, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("can't parse JSON body: %w", err)
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = s
			} else {
				out[k] = string(v)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			// The library sends an empty multipart body for methods
			// without parameters (getMe).
			if r.ContentLength > 0 && !strings.Contains(err.Error(), "EOF") {
				return nil, err
			}
			return out, nil
		}
		for k, v := range r.MultipartForm.Value {
			out[k] = v[0]
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.PostForm {
			out[k] = v[0]
		}
	}
	return out, nil
}

func writeOK(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeErr(w http.ResponseWriter, f Failure) {
	body := map[string]any{"ok": false, "error_code": f.Code, "description": f.Description}
	if f.RetryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": f.RetryAfter}
	}
	if f.MigrateToChatID != 0 {
		body["parameters"] = map[string]any{"migrate_to_chat_id": f.MigrateToChatID}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Code)
	_ = json.NewEncoder(w).Encode(body)
}

// User builds a human sender.
func User(id int64, username string) *models.User {
	return &models.User{ID: id, FirstName: "User" + strconv.FormatInt(id, 10), Username: username}
}

// Private builds a private-chat message from user.
func (s *Server) Private(from *models.User, text string) models.Update {
	return models.Update{Message: &models.Message{
		ID: s.NextMessageID(), From: from, Date: int(time.Now().Unix()), Text: text,
		Chat: models.Chat{ID: from.ID, Type: models.ChatTypePrivate, FirstName: from.FirstName},
	}}
}

// Group builds a supergroup message; thread > 0 makes it a forum topic
// message.
func (s *Server) Group(chatID int64, from *models.User, text string, thread int) models.Update {
	m := &models.Message{
		ID: s.NextMessageID(), From: from, Date: int(time.Now().Unix()), Text: text,
		Chat: models.Chat{ID: chatID, Type: models.ChatTypeSupergroup, Title: "group", IsForum: thread > 0},
	}
	if thread > 0 {
		m.MessageThreadID = thread
		m.IsTopicMessage = true
	}
	m.Entities = entities(text)
	return models.Update{Message: m}
}

// entities marks @mentions and a leading /command the way Telegram does
// (offsets in UTF-16 units).
func entities(text string) []models.MessageEntity {
	var out []models.MessageEntity
	off := 0
	for _, word := range strings.SplitAfter(text, " ") {
		w := strings.TrimRight(word, " ")
		switch {
		case strings.HasPrefix(w, "@") && len(w) > 1:
			out = append(out, models.MessageEntity{Type: models.MessageEntityTypeMention, Offset: off, Length: textfmt.Len(w)})
		case strings.HasPrefix(w, "/") && off == 0:
			out = append(out, models.MessageEntity{Type: models.MessageEntityTypeBotCommand, Offset: 0, Length: textfmt.Len(w)})
		}
		off += textfmt.Len(word)
	}
	return out
}

// Reaction builds a message_reaction update: user changed their reaction
// on message msgID in chat from old to new emoji.
func Reaction(chatID int64, chatType models.ChatType, msgID int, user *models.User, old, new []string) models.Update {
	conv := func(es []string) []models.ReactionType {
		out := []models.ReactionType{}
		for _, e := range es {
			out = append(out, models.ReactionType{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Type: models.ReactionTypeTypeEmoji, Emoji: e}})
		}
		return out
	}
	return models.Update{MessageReaction: &models.MessageReactionUpdated{
		Chat: models.Chat{ID: chatID, Type: chatType}, MessageID: msgID, User: user,
		Date: int(time.Now().Unix()), OldReaction: conv(old), NewReaction: conv(new),
	}}
}
