package discordtest

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Edit is one edit of a bot message (PATCH /channels/{id}/messages/{mid}).
type Edit struct {
	ChannelID, MessageID, Content string
	At                            time.Time
}

// Upload is a file the bot attached to a message.
type Upload struct {
	MessageID, ChannelID string
	Name, ContentType    string
	Data                 []byte
	At                   time.Time
}

// Attachment is a file a user's message carries (Msg.Attachments).
type Attachment struct {
	Name, ContentType string
	// URL is where the fake serves it (AddFile's answer).
	URL  string
	Size int
}

// mediaState is the fake's edits, deletions, uploads and user files.
type mediaState struct {
	edits   []Edit
	deleted []string
	uploads []Upload
	files   map[string][]byte
	served  map[string]int64
}

// Sticker is a sticker a message carries: its id, name and format_type
// (1 PNG, 2 APNG, 3 Lottie, 4 GIF).
type Sticker struct {
	ID, Name string
	Format   int
}

// Edits returns the edits of bot messages so far.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.media.edits...)
}

// Deleted returns the ids of bot messages deleted so far.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.media.deleted...)
}

// Uploads returns the files the bot attached so far.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.media.uploads...)
}

// Content returns what message id reads now and whether it exists.
func (s *Server) Content(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	return m.Content, ok
}

// AddFile serves data as a user's attachment and returns its URL (on the
// fake's host, standing for Discord's CDN).
func (s *Server) AddFile(name string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.media.files == nil {
		s.media.files, s.media.served = map[string][]byte{}, map[string]int64{}
	}
	id := s.id()
	s.media.files[id] = data
	return s.srv.URL + "/attachments/" + id + "/" + name
}

// AddSticker serves data as the image of a sticker (at
// /stickers/<id>.<ext>, standing for Discord's media CDN) and returns
// the sticker's id.
func (s *Server) AddSticker(data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.media.files == nil {
		s.media.files, s.media.served = map[string][]byte{}, map[string]int64{}
	}
	id := s.id()
	s.media.files["sticker:"+id] = data
	return id
}

// serveSticker serves a sticker's image by its id (any extension).
func (s *Server) serveSticker(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(r.PathValue("file"), ".")
	s.mu.Lock()
	data, ok := s.media.files["sticker:"+id]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(data)
}

// Served returns how many bytes of the attachment at url were served.
func (s *Server) Served(url string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.media.served {
		if strings.Contains(url, "/attachments/"+id+"/") {
			return n
		}
	}
	return 0
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Content *string `json:"content"`
	}
	if err := decode(r, &body); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	id := r.PathValue("mid")
	s.mu.Lock()
	m, ok := s.messages[id]
	if !ok || m.Author.ID != s.Bot.ID {
		s.mu.Unlock()
		reply(w, 404, apiError{Message: "Unknown Message", Code: 10008})
		return
	}
	s.mu.Unlock()
	if body.Content != nil && !checkContent(w, *body.Content) {
		return
	}
	s.mu.Lock()
	if body.Content != nil {
		m.Content = *body.Content
	}
	s.messages[id] = m
	s.media.edits = append(s.media.edits, Edit{ChannelID: m.ChannelID, MessageID: id, Content: m.Content, At: time.Now()})
	s.notify()
	s.mu.Unlock()
	reply(w, 200, map[string]any{"id": id, "channel_id": m.ChannelID, "content": m.Content, "author": s.Bot, "type": 0,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "mentions": []any{}, "attachments": []any{}, "embeds": []any{}})
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("mid")
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.messages[id]; !ok || m.Author.ID != s.Bot.ID {
		reply(w, 404, apiError{Message: "Unknown Message", Code: 10008})
		return
	}
	delete(s.messages, id)
	s.media.deleted = append(s.media.deleted, id)
	s.notify()
	reply(w, http.StatusNoContent, nil)
}

// multipartMessage reads a message sent with files: payload_json and
// files[n]; Discord refuses a file over 10 MiB with 413.
func (s *Server) multipartMessage(w http.ResponseWriter, r *http.Request) (outgoing, []Upload, bool) {
	var body outgoing
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return body, nil, false
	}
	if p := r.FormValue("payload_json"); p != "" {
		if err := json.Unmarshal([]byte(p), &body); err != nil {
			reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
			return body, nil, false
		}
	}
	var ups []Upload
	for i := 0; ; i++ {
		fhs := r.MultipartForm.File["files["+strconv.Itoa(i)+"]"]
		if len(fhs) == 0 {
			fhs = r.MultipartForm.File["file"+strconv.Itoa(i)]
		}
		if len(fhs) == 0 {
			break
		}
		f, err := fhs[0].Open()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(f)
		f.Close()
		if len(data) > 10<<20 {
			reply(w, 413, apiError{Message: "Request entity too large", Code: 40005})
			return body, nil, false
		}
		ct := fhs[0].Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			ct = mt
		}
		ups = append(ups, Upload{Name: fhs[0].Filename, ContentType: ct, Data: data, At: time.Now()})
	}
	if len(ups) == 0 {
		reply(w, 400, apiError{Message: "Cannot send an empty message", Code: 50006})
		return body, nil, false
	}
	return body, ups, true
}

// serveAttachment serves a user's attachment, counting the bytes sent.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("aid")
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

// attachmentsJSON renders a message's attachments as MESSAGE_CREATE
// carries them.
func (s *Server) attachmentsJSON(as []Attachment) []any {
	out := []any{}
	for _, a := range as {
		out = append(out, map[string]any{"id": s.id(), "filename": a.Name, "content_type": a.ContentType, "size": a.Size,
			"url": a.URL, "proxy_url": a.URL})
	}
	return out
}
