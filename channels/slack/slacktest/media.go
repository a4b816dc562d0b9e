package slacktest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Update is one chat.update the bot made.
type Update struct {
	Channel, TS, Text string
	At                time.Time
}

// StreamCall is one call of Slack's streaming message API:
// chat.startStream, chat.appendStream or chat.stopStream.
type StreamCall struct {
	Method          string
	Channel, TS     string
	ThreadTS        string
	MarkdownText    string
	RecipientUserID string
	RecipientTeamID string
	At              time.Time
}

// Upload is a file the bot shared with the external upload flow.
type Upload struct {
	ID, Name        string
	Channel, Thread string
	Data            []byte
	Completed       bool
	At              time.Time
}

// mediaState is the fake's view of edits, streams, deletions, uploads
// and the files users share.
type mediaState struct {
	text            map[string]string // "<channel>:<ts>" → the message's text now
	updates         []Update
	streams         []StreamCall
	open            map[string]bool // streams started and not stopped
	deleted         []string
	uploads         map[string]*Upload
	order           []string
	files           map[string][]byte
	served          map[string]int64
	noStreams       bool
	noStreamsStatus int
	noFilesRead     bool
	shared          map[string]File // file id → as shared
}

func (m *mediaState) init() {
	if m.text == nil {
		m.text, m.open, m.uploads, m.files, m.served = map[string]string{}, map[string]bool{}, map[string]*Upload{}, map[string][]byte{}, map[string]int64{}
	}
}

// Text returns what the bot's message channel/ts reads now and whether
// it exists.
func (s *Server) Text(channel, ts string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.media.text[channel+":"+ts]
	return t, ok
}

// Updates returns the chat.update calls so far.
func (s *Server) Updates() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Update(nil), s.media.updates...)
}

// Streams returns the streaming API calls so far.
func (s *Server) Streams() []StreamCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StreamCall(nil), s.media.streams...)
}

// Deleted returns the "<channel>:<ts>" of the messages deleted so far.
func (s *Server) Deleted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.media.deleted...)
}

// Uploads returns the files the bot completed uploading, in order.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Upload
	for _, id := range s.media.order {
		if u := s.media.uploads[id]; u.Completed {
			out = append(out, *u)
		}
	}
	return out
}

// RefuseStreams makes chat.startStream fail, as a workspace (or a
// server in front of Slack) without the streaming API: with ok:false
// and not_allowed when status is 0, else with that HTTP status.
func (s *Server) RefuseStreams(status int) {
	s.mu.Lock()
	s.media.noStreams, s.media.noStreamsStatus = true, status
	s.mu.Unlock()
}

// AddFile stores a file a user shares and returns its url_private_download
// (served by the fake, with the bot token required).
func (s *Server) AddFile(data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.media.init()
	id := s.newID("F")
	s.media.files[id] = data
	return s.srv.URL + "/files-pri/" + id
}

// WithoutFilesRead makes the bot token lack the files:read scope: Slack
// then answers a file download with its sign-in page (200, HTML), not
// with an error.
func (s *Server) WithoutFilesRead() {
	s.mu.Lock()
	s.media.noFilesRead = true
	s.mu.Unlock()
}

// Served returns how many bytes of the file at url were downloaded.
func (s *Server) Served(url string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media.served[url[strings.LastIndex(url, "/")+1:]]
}

// File describes a file in a message event.
type File struct {
	URL, Name, MIME string
	Size            int
	// Stub sends only the file's id with file_access check_file_info,
	// as Slack does for a file shared over Slack Connect: files.info
	// tells the rest.
	Stub bool
}

// DMFile makes user name share a file with the bot in their direct
// message channel, with text (may be empty): a message event of subtype
// file_share.
func (s *Server) DMFile(name, text string, f File) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := DMChannel(name)
	ts := s.message(ch, "", UserID(name), text)
	return s.messageEvent(ch, "im", UserID(name), text, ts, "", map[string]any{"subtype": "file_share", "files": s.fileObjects(f)})
}

// MentionFile makes user name share a file in channel with text that
// mentions the bot: an app_mention event carrying the files, as Slack
// sends it (the message event of subtype file_share is its twin).
func (s *Server) MentionFile(name, channel, text string, f File) Envelope {
	if !strings.Contains(text, BotMention) {
		text = BotMention + " " + text
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.message(channel, "", UserID(name), text)
	ev := map[string]any{"type": "app_mention", "channel": channel, "user": UserID(name), "text": text,
		"ts": ts, "event_ts": ts, "team": TeamID, "client_msg_id": s.newID("msg-"), "files": s.fileObjects(f)}
	return s.event(ev, channel, ts)
}

// fileObjects is the files array of an event sharing f (the caller
// holds mu: files.info tells what it shared).
func (s *Server) fileObjects(f File) []map[string]any {
	id := f.URL[strings.LastIndex(f.URL, "/")+1:]
	if s.media.shared == nil {
		s.media.shared = map[string]File{}
	}
	s.media.shared[id] = f
	if f.Stub {
		return []map[string]any{{"id": id, "mode": "file_access", "file_access": "check_file_info", "created": 0, "timestamp": 0, "user": ""}}
	}
	return []map[string]any{{"id": id, "name": f.Name, "title": f.Name, "mimetype": f.MIME, "size": f.Size,
		"url_private": f.URL, "url_private_download": f.URL}}
}

// mediaAPI serves the Web API methods of this file; ok=false for others.
func (s *Server) mediaAPI(w http.ResponseWriter, method string, p url.Values) bool {
	s.mu.Lock()
	s.media.init()
	s.mu.Unlock()
	switch method {
	case "chat.update":
		s.chatUpdate(w, p)
	case "chat.delete":
		s.mu.Lock()
		k := p.Get("channel") + ":" + p.Get("ts")
		_, ok := s.media.text[k]
		if ok {
			delete(s.media.text, k)
			s.media.deleted = append(s.media.deleted, k)
			s.notify()
		}
		s.mu.Unlock()
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
			return true
		}
		writeJSON(w, map[string]any{"ok": true, "channel": p.Get("channel"), "ts": p.Get("ts")})
	case "chat.startStream", "chat.appendStream", "chat.stopStream":
		s.stream(w, method, p)
	case "files.getUploadURLExternal":
		size, _ := strconv.Atoi(p.Get("length"))
		if p.Get("filename") == "" || size <= 0 {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments"})
			return true
		}
		s.mu.Lock()
		id := s.newID("F")
		s.media.uploads[id] = &Upload{ID: id, Name: p.Get("filename")}
		s.media.order = append(s.media.order, id)
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "upload_url": s.srv.URL + "/api/upload/" + id, "file_id": id})
	case "files.completeUploadExternal":
		s.completeUpload(w, p)
	case "files.info":
		id := p.Get("file")
		s.mu.Lock()
		f, ok := s.media.shared[id]
		s.mu.Unlock()
		if !ok {
			writeJSON(w, map[string]any{"ok": false, "error": "file_not_found"})
			return true
		}
		writeJSON(w, map[string]any{"ok": true, "file": map[string]any{"id": id, "name": f.Name, "title": f.Name, "mimetype": f.MIME,
			"size": f.Size, "url_private": f.URL, "url_private_download": f.URL}})
	default:
		return false
	}
	return true
}

// shown records a message's text; the caller holds mu.
func (s *Server) shown(channel, ts, text string) {
	s.media.init()
	s.media.text[channel+":"+ts] = text
}

func (s *Server) chatUpdate(w http.ResponseWriter, p url.Values) {
	channel, ts, text := p.Get("channel"), p.Get("ts"), p.Get("text")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.media.text[channel+":"+ts]; !ok {
		writeJSON(w, map[string]any{"ok": false, "error": "message_not_found"})
		return
	}
	if strings.TrimSpace(text) == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "no_text"})
		return
	}
	if len([]rune(text)) > 40000 {
		writeJSON(w, map[string]any{"ok": false, "error": "msg_too_long"})
		return
	}
	s.media.text[channel+":"+ts] = text
	s.media.updates = append(s.media.updates, Update{Channel: channel, TS: ts, Text: text, At: time.Now()})
	s.notify()
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts, "text": text})
}

func (s *Server) stream(w http.ResponseWriter, method string, p url.Values) {
	channel, ts := p.Get("channel"), p.Get("ts")
	s.mu.Lock()
	defer s.mu.Unlock()
	c := StreamCall{Method: method, Channel: channel, TS: ts, ThreadTS: p.Get("thread_ts"), MarkdownText: p.Get("markdown_text"),
		RecipientUserID: p.Get("recipient_user_id"), RecipientTeamID: p.Get("recipient_team_id"), At: time.Now()}
	switch method {
	case "chat.startStream":
		if s.media.noStreams {
			if s.media.noStreamsStatus != 0 {
				http.Error(w, "no streaming here", s.media.noStreamsStatus)
				return
			}
			writeJSON(w, map[string]any{"ok": false, "error": "not_allowed"})
			return
		}
		if c.ThreadTS == "" {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments", "detail": "thread_ts is required"})
			return
		}
		c.TS = s.newTS()
		s.media.open[channel+":"+c.TS] = true
		s.media.text[channel+":"+c.TS] = c.MarkdownText
		s.messages = append(s.messages, Message{Channel: channel, TS: c.TS, ThreadTS: c.ThreadTS, User: BotUserID, BotID: BotID, Text: c.MarkdownText, Type: "message"})
	case "chat.appendStream":
		if !s.media.open[channel+":"+ts] {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_in_streaming_state"})
			return
		}
		s.media.text[channel+":"+ts] += c.MarkdownText
	case "chat.stopStream":
		if !s.media.open[channel+":"+ts] {
			writeJSON(w, map[string]any{"ok": false, "error": "message_not_in_streaming_state"})
			return
		}
		delete(s.media.open, channel+":"+ts)
		s.media.text[channel+":"+ts] += c.MarkdownText
	}
	s.media.streams = append(s.media.streams, c)
	s.notify()
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": c.TS})
}

// serveUpload takes the bytes POSTed to an upload URL.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/api/upload/")
	var data []byte
	if err := r.ParseMultipartForm(64 << 20); err == nil && len(r.MultipartForm.File["file"]) > 0 {
		f, err := r.MultipartForm.File["file"][0].Open()
		if err == nil {
			data, _ = io.ReadAll(f)
			f.Close()
		}
	} else {
		data, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	u, ok := s.media.uploads[id]
	if ok {
		u.Data = data
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "OK - %d", len(data))
}

func (s *Server) completeUpload(w http.ResponseWriter, p url.Values) {
	files := p.Get("files")
	s.mu.Lock()
	defer s.mu.Unlock()
	var done []map[string]any
	for id, u := range s.media.uploads {
		if !strings.Contains(files, `"`+id+`"`) {
			continue
		}
		if u.Data == nil {
			writeJSON(w, map[string]any{"ok": false, "error": "file_not_uploaded"})
			return
		}
		u.Completed, u.Channel, u.Thread, u.At = true, p.Get("channel_id"), p.Get("thread_ts"), time.Now()
		done = append(done, map[string]any{"id": id, "title": u.Name})
	}
	if len(done) == 0 {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments"})
		return
	}
	s.notify()
	writeJSON(w, map[string]any{"ok": true, "files": done})
}

// serveFile serves a shared file's url_private_download to the bot token.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.BotToken {
		http.Error(w, "not authorized", http.StatusForbidden)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/files-pri/")
	s.mu.Lock()
	data, ok := s.media.files[id]
	signIn := s.media.noFilesRead
	s.mu.Unlock()
	if ok && signIn {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to your workspace</body></html>")
		return
	}
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

// WaitUpdates waits until at least n chat.update calls were made.
func (s *Server) WaitUpdates(t testing.TB, n int, timeout time.Duration) []Update {
	t.Helper()
	s.WaitFor(t, fmt.Sprintf("%d chat.update calls", n), timeout, func() bool { return len(s.Updates()) >= n })
	return s.Updates()
}
