package telegramtest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/textfmt"
)

// Edit is one editMessageText the bot made.
type Edit struct {
	ChatID    int64
	MessageID int
	Text      string
	At        time.Time
}

// Draft is one sendMessageDraft the bot made.
type Draft struct {
	ChatID  int64
	DraftID string
	Text    string
	At      time.Time
}

// Upload is a file the bot sent with sendPhoto or sendDocument.
type Upload struct {
	Method    string // "sendPhoto" or "sendDocument"
	MessageID int
	ChatID    int64
	Name      string
	Data      []byte
	At        time.Time
}

// mediaState is the fake's messages as they read now, its edits,
// drafts, deletions, uploads and the files users sent.
type mediaState struct {
	text     map[string]string // "<chat>:<message>" → current text
	edits    []Edit
	drafts   []Draft
	deleted  []string
	uploads  []Upload
	files    map[string][]byte // file_id → content
	served   map[string]int64  // file_id → bytes served so far
	refuseDr bool
}

func msgKey(chat int64, msg int) string { return strconv.FormatInt(chat, 10) + ":" + strconv.Itoa(msg) }

// shown records what a message reads now; the caller holds mu.
func (m *mediaState) shown(chat int64, msg int, text string) {
	if m.text == nil {
		m.text = map[string]string{}
	}
	m.text[msgKey(chat, msg)] = text
}

// Text returns what message msg of chat reads now (after its edits) and
// whether it exists (sent and not deleted).
func (s *Server) Text(chat int64, msg int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.media.text[msgKey(chat, msg)]
	return t, ok
}

// Edits returns the editMessageText calls so far.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.media.edits...)
}

// Drafts returns the sendMessageDraft calls so far.
func (s *Server) Drafts() []Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Draft(nil), s.media.drafts...)
}

// Deleted returns the "<chat>:<message>" ids deleted so far.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.media.deleted...)
}

// Uploads returns the files the bot sent so far.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.media.uploads...)
}

// RefuseDrafts makes sendMessageDraft answer 400, as for a bot whose
// drafts Telegram does not take.
func (s *Server) RefuseDrafts() {
	s.mu.Lock()
	s.media.refuseDr = true
	s.mu.Unlock()
}

// AddFile stores a file a user sends and returns its file_id.
func (s *Server) AddFile(data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.media.files == nil {
		s.media.files, s.media.served = map[string][]byte{}, map[string]int64{}
	}
	id := fmt.Sprintf("file-%d", len(s.media.files)+1)
	s.media.files[id] = data
	return id
}

// Served returns how many bytes of a file were downloaded so far.
func (s *Server) Served(fileID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media.served[fileID]
}

func (s *Server) editMessageText(w http.ResponseWriter, p map[string]string) {
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	msg, _ := strconv.Atoi(p["message_id"])
	text := p["text"]
	visible := text
	if strings.EqualFold(p["parse_mode"], "HTML") {
		if err := textfmt.ValidateTelegramHTML(text); err != nil {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: can't parse entities: " + err.Error()})
			return
		}
		visible = textfmt.HTMLToPlain(text)
	}
	if textfmt.Len(visible) > 4096 {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: MESSAGE_TOO_LONG"})
		return
	}
	s.mu.Lock()
	old, ok := s.media.text[msgKey(chat, msg)]
	if !ok {
		s.mu.Unlock()
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message to edit not found"})
		return
	}
	if old == text {
		s.mu.Unlock()
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
		return
	}
	s.media.shown(chat, msg, text)
	s.media.edits = append(s.media.edits, Edit{ChatID: chat, MessageID: msg, Text: text, At: time.Now()})
	s.notify()
	bot := s.Bot
	s.mu.Unlock()
	writeOK(w, models.Message{ID: msg, From: &bot, Date: int(time.Now().Unix()), Chat: models.Chat{ID: chat, Type: "private"}, Text: visible})
}

func (s *Server) deleteMessage(w http.ResponseWriter, p map[string]string) {
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	msg, _ := strconv.Atoi(p["message_id"])
	s.mu.Lock()
	defer s.mu.Unlock()
	k := msgKey(chat, msg)
	if _, ok := s.media.text[k]; !ok {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message to delete not found"})
		return
	}
	delete(s.media.text, k)
	s.media.deleted = append(s.media.deleted, k)
	s.notify()
	writeOK(w, true)
}

func (s *Server) sendMessageDraft(w http.ResponseWriter, p map[string]string) {
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.media.refuseDr {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: method is available only for bots with topics in private chats"})
		return
	}
	if p["draft_id"] == "" || p["draft_id"] == "0" {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: draft_id must be non-zero"})
		return
	}
	if err := textfmt.ValidateTelegramHTML(p["text"]); strings.EqualFold(p["parse_mode"], "HTML") && err != nil {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: can't parse entities: " + err.Error()})
		return
	}
	s.media.drafts = append(s.media.drafts, Draft{ChatID: chat, DraftID: p["draft_id"], Text: p["text"], At: time.Now()})
	s.notify()
	writeOK(w, true)
}

func (s *Server) sendFile(w http.ResponseWriter, r *http.Request, method string, p map[string]string) {
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: chat not found"})
		return
	}
	field := "document"
	if method == "sendPhoto" {
		field = "photo"
	}
	if r.MultipartForm == nil || len(r.MultipartForm.File[field]) == 0 {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: there is no " + field + " in the request"})
		return
	}
	fh := r.MultipartForm.File[field][0]
	f, err := fh.Open()
	if err != nil {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	data, _ := io.ReadAll(f)
	f.Close()
	limit := int64(50 << 20)
	if method == "sendPhoto" {
		limit = 10 << 20
	}
	if int64(len(data)) > limit {
		writeErr(w, Failure{Code: 413, Description: "Request Entity Too Large"})
		return
	}
	s.mu.Lock()
	s.nextMsg++
	u := Upload{Method: method, MessageID: s.nextMsg, ChatID: chat, Name: fh.Filename, Data: data, At: time.Now()}
	s.media.uploads = append(s.media.uploads, u)
	s.notify()
	bot := s.Bot
	s.mu.Unlock()
	writeOK(w, models.Message{ID: u.MessageID, From: &bot, Date: int(time.Now().Unix()), Chat: models.Chat{ID: chat, Type: "private"}})
}

func (s *Server) getFile(w http.ResponseWriter, p map[string]string) {
	s.mu.Lock()
	data, ok := s.media.files[p["file_id"]]
	s.mu.Unlock()
	if !ok {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: invalid file_id"})
		return
	}
	if len(data) > 20<<20 {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: file is too big"})
		return
	}
	writeOK(w, models.File{FileID: p["file_id"], FileUniqueID: p["file_id"], FileSize: int64(len(data)), FilePath: "files/" + p["file_id"]})
}

// serveFile serves GET /file/bot<token>/files/<file_id>, counting the
// bytes it sends.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	prefix := "/file/bot" + s.Token + "/files/"
	if !strings.HasPrefix(r.URL.Path, prefix) {
		http.NotFound(w, r)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, prefix)
	s.mu.Lock()
	data, ok := s.media.files[id]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	for off := 0; off < len(data); off += 32 << 10 {
		n, err := w.Write(data[off:min(off+32<<10, len(data))])
		s.mu.Lock()
		s.media.served[id] += int64(n)
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Photo builds a private-chat photo message (a caption is optional)
// whose largest size is the file fileID of size bytes.
func (s *Server) Photo(from *models.User, fileID string, size int, caption string) models.Update {
	u := s.Private(from, "")
	u.Message.Caption = caption
	u.Message.Photo = []models.PhotoSize{
		{FileID: fileID + "-small", FileUniqueID: fileID + "-small", Width: 90, Height: 90, FileSize: 1000},
		{FileID: fileID, FileUniqueID: fileID, Width: 800, Height: 600, FileSize: size},
	}
	return u
}

// Voice builds a private-chat voice note of the file fileID.
func (s *Server) Voice(from *models.User, fileID string, size int) models.Update {
	u := s.Private(from, "")
	u.Message.Voice = &models.Voice{FileID: fileID, FileUniqueID: fileID, Duration: 3, MimeType: "audio/ogg", FileSize: int64(size)}
	return u
}

// Document builds a private-chat document message.
func (s *Server) Document(from *models.User, fileID, name, mime string, size int, caption string) models.Update {
	u := s.Private(from, "")
	u.Message.Caption = caption
	u.Message.Document = &models.Document{FileID: fileID, FileUniqueID: fileID, FileName: name, MimeType: mime, FileSize: int64(size)}
	return u
}

// WaitEdits waits until at least n edits were made and returns them.
func (s *Server) WaitEdits(t testing.TB, n int, timeout time.Duration) []Edit {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d edits", n), timeout, func([]Sent, []Call) bool { return len(s.Edits()) >= n })
	return s.Edits()
}
