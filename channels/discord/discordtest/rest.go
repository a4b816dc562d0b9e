package discordtest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// The REST API of channels and messages.

func (s *Server) getChannel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	c, ok := s.channels[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		reply(w, 404, apiError{Message: "Unknown Channel", Code: 10003})
		return
	}
	reply(w, 200, c)
}

// BotRole returns the role Discord made for the bot when it joined
// guild (managed, tagged with the bot's id), the same one every time.
// Users can mention it in place of the bot: the client offers both.
func (s *Server) BotRole(guild string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.botRoles[guild]; ok {
		return id
	}
	id := s.id()
	s.botRoles[guild] = id
	return id
}

// guildRoles lists a guild's roles: @everyone (the guild's id) and the
// bot's managed role once BotRole made it.
func (s *Server) guildRoles(w http.ResponseWriter, r *http.Request) {
	guild := r.PathValue("id")
	s.mu.Lock()
	botRole, ok := s.botRoles[guild]
	s.mu.Unlock()
	roles := []map[string]any{{"id": guild, "name": "@everyone", "managed": false, "position": 0, "permissions": "0"}}
	if ok {
		roles = append(roles, map[string]any{"id": botRole, "name": s.Bot.Username, "managed": true, "position": 1,
			"permissions": "0", "tags": map[string]any{"bot_id": s.Bot.ID}})
	}
	reply(w, 200, roles)
}

// outgoing is the body of a message the bot sends.
type outgoing struct {
	Content         string           `json:"content"`
	AllowedMentions *AllowedMentions `json:"allowed_mentions"`
	Reference       *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
	Flags int `json:"flags"`
	// Nonce and EnforceNonce: a second message with the nonce of a recent
	// one in the same channel is not created again (Discord keeps them a
	// few minutes); the first is answered.
	Nonce        json.RawMessage `json:"nonce"`
	EnforceNonce bool            `json:"enforce_nonce"`
}

func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// checkContent answers 400 like Discord for an empty or oversized message.
func checkContent(w http.ResponseWriter, content string) bool {
	if strings.TrimSpace(content) == "" {
		reply(w, 400, apiError{Message: "Cannot send an empty message", Code: 50006})
		return false
	}
	if n := len([]rune(content)); n > 2000 {
		reply(w, 400, apiError{Message: fmt.Sprintf("Invalid Form Body: content: Must be 2000 or fewer in length (%d).", n), Code: 50035})
		return false
	}
	return true
}

// store records a message the bot sent and returns it as Discord does.
func (s *Server) store(channelID string, body outgoing, via, interactionID string) map[string]any {
	s.mu.Lock()
	m := message{ID: s.id(), ChannelID: channelID, Author: s.Bot, Content: body.Content}
	s.messages[m.ID] = m
	sent := Sent{ID: m.ID, ChannelID: channelID, Content: body.Content, AllowedMentions: body.AllowedMentions,
		Via: via, Interaction: interactionID, Flags: body.Flags, At: time.Now()}
	if body.Reference != nil {
		sent.ReplyTo = body.Reference.MessageID
	}
	s.sent = append(s.sent, sent)
	f := s.onSent
	s.notify()
	s.mu.Unlock()
	if f != nil {
		f(sent)
	}
	return map[string]any{"id": m.ID, "channel_id": channelID, "content": m.Content, "author": s.Bot, "type": 0,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "mentions": []any{}, "attachments": []any{}, "embeds": []any{}}
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	var body outgoing
	var ups []Upload
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		var ok bool
		if body, ups, ok = s.multipartMessage(w, r); !ok {
			return
		}
	} else if err := decode(r, &body); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	_, known := s.channels[id]
	closed := s.closedDMs[id]
	s.mu.Unlock()
	if !known {
		reply(w, 404, apiError{Message: "Unknown Channel", Code: 10003})
		return
	}
	if closed {
		reply(w, 403, apiError{Message: "Cannot send messages to this user", Code: 50007})
		return
	}
	if ref := body.Reference; ref != nil && !snowflake(ref.MessageID) {
		// Discord validates the form before it looks the message up.
		reply(w, 400, apiError{Message: fmt.Sprintf("Invalid Form Body: message_reference.message_id: Value %q is not snowflake.", ref.MessageID), Code: 50035})
		return
	}
	key := ""
	if body.EnforceNonce && len(body.Nonce) > 0 {
		key = id + "|" + string(body.Nonce)
		s.mu.Lock()
		prev, seen := s.nonces[key]
		s.mu.Unlock()
		if seen {
			reply(w, 200, prev)
			return
		}
	}
	if len(ups) > 0 {
		m := s.store(id, body, "channel", "")
		if key != "" {
			s.mu.Lock()
			s.nonces[key] = m
			s.mu.Unlock()
		}
		s.mu.Lock()
		for _, u := range ups {
			u.MessageID, u.ChannelID = m["id"].(string), id
			s.media.uploads = append(s.media.uploads, u)
		}
		s.notify()
		s.mu.Unlock()
		reply(w, 200, m)
		return
	}
	if !checkContent(w, body.Content) {
		return
	}
	m := s.store(id, body, "channel", "")
	if key != "" {
		s.mu.Lock()
		s.nonces[key] = m
		s.mu.Unlock()
	}
	reply(w, 200, m)
}

func (s *Server) postTyping(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.typing = append(s.typing, r.PathValue("id"))
	s.notify()
	s.mu.Unlock()
	reply(w, http.StatusNoContent, nil)
}

func (s *Server) reaction(remove bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("who") != "@me" {
			reply(w, 403, apiError{Message: "Missing Permissions", Code: 50013})
			return
		}
		s.mu.Lock()
		s.reactions = append(s.reactions, Reaction{ChannelID: r.PathValue("id"), MessageID: r.PathValue("mid"), Emoji: r.PathValue("emoji"), Removed: remove})
		s.notify()
		s.mu.Unlock()
		reply(w, http.StatusNoContent, nil)
	}
}

// snowflake says whether id is a Discord id: a decimal number.
func snowflake(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
