package discordtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The application commands, kept as the bot sent them plus the fields
// Discord adds.

func (s *Server) listCommands(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("app") != s.AppID {
		reply(w, 403, apiError{Message: "Missing Access", Code: 50001})
		return
	}
	s.mu.Lock()
	list := []json.RawMessage{}
	for _, c := range s.commands[r.PathValue("guild")] {
		list = append(list, c)
	}
	s.mu.Unlock()
	reply(w, 200, list)
}

func (s *Server) putCommand(w http.ResponseWriter, r *http.Request, id string) {
	var c map[string]any
	if err := decode(r, &c); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	name, _ := c["name"].(string)
	desc, _ := c["description"].(string)
	if name == "" || len(name) > 32 || strings.ToLower(name) != name || desc == "" || len([]rune(desc)) > 100 {
		reply(w, 400, apiError{Message: "Invalid Form Body: name or description", Code: 50035})
		return
	}
	scope := r.PathValue("guild")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.commands[scope] == nil {
		s.commands[scope] = map[string]json.RawMessage{}
	}
	if id == "" {
		id = s.id()
		// POST with the name of an existing command replaces it.
		var old struct {
			ID string `json:"id"`
		}
		if prev, ok := s.commands[scope][name]; ok && json.Unmarshal(prev, &old) == nil {
			id = old.ID
		}
	} else {
		found := false
		for n, prev := range s.commands[scope] {
			var old struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(prev, &old) == nil && old.ID == id {
				delete(s.commands[scope], n)
				found = true
			}
		}
		if !found {
			reply(w, 404, apiError{Message: "Unknown application command", Code: 10063})
			return
		}
	}
	c["id"], c["application_id"], c["version"] = id, s.AppID, s.id()
	if _, ok := c["type"]; !ok {
		c["type"] = 1
	}
	if scope != "" {
		c["guild_id"] = scope
	}
	raw, _ := json.Marshal(c)
	s.commands[scope][name] = raw
	s.cmdWrites++
	s.notify()
	reply(w, 200, json.RawMessage(raw))
}

func (s *Server) createCommand(w http.ResponseWriter, r *http.Request) { s.putCommand(w, r, "") }
func (s *Server) editCommand(w http.ResponseWriter, r *http.Request) {
	s.putCommand(w, r, r.PathValue("cmd"))
}

func (s *Server) deleteCommand(w http.ResponseWriter, r *http.Request) {
	scope := r.PathValue("guild")
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, prev := range s.commands[scope] {
		var old struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(prev, &old) == nil && old.ID == r.PathValue("cmd") {
			delete(s.commands[scope], n)
			s.cmdWrites++
			s.notify()
			reply(w, http.StatusNoContent, nil)
			return
		}
	}
	reply(w, 404, apiError{Message: "Unknown application command", Code: 10063})
}

// Interactions: the callback must come within 3 seconds and only once;
// the webhook token then works for 15 minutes (ExpireInteraction ends it
// early).

const interactionWindow = 3 * time.Second

func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Type int `json:"type"`
		Data struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
		} `json:"data"`
	}
	if err := decode(r, &body); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[r.PathValue("id")]
	switch {
	case !ok || in.token != r.PathValue("token") || time.Since(in.at) > interactionWindow:
		reply(w, 404, apiError{Message: "Unknown interaction", Code: 10062})
		return
	case in.responded:
		reply(w, 400, apiError{Message: "Interaction has already been acknowledged.", Code: 40060})
		return
	}
	in.responded, in.flags = true, body.Data.Flags
	s.callbacks = append(s.callbacks, Callback{Interaction: in.id, Type: body.Type, Flags: body.Data.Flags, Content: body.Data.Content, At: time.Now()})
	s.notify()
	reply(w, http.StatusNoContent, nil)
}

// webhookInteraction finds the interaction of a webhook token; the caller
// holds mu.
func (s *Server) webhookInteraction(app, token string) *interaction {
	if app != s.AppID {
		return nil
	}
	for _, in := range s.interactions {
		if in.token == token && !in.expired {
			return in
		}
	}
	return nil
}

func (s *Server) editOriginal(w http.ResponseWriter, r *http.Request) {
	var body outgoing
	if err := decode(r, &body); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	s.mu.Lock()
	in := s.webhookInteraction(r.PathValue("app"), r.PathValue("token"))
	switch {
	case in == nil:
		s.mu.Unlock()
		reply(w, 401, apiError{Message: "Invalid Webhook Token", Code: 50027})
		return
	case r.PathValue("mid") != "@original" || !in.responded:
		s.mu.Unlock()
		reply(w, 404, apiError{Message: "Unknown Message", Code: 10008})
		return
	}
	id, ch := in.id, in.channelID
	body.Flags = in.flags
	s.mu.Unlock()
	if !checkContent(w, body.Content) {
		return
	}
	reply(w, 200, s.store(ch, body, "original", id))
}

func (s *Server) followup(w http.ResponseWriter, r *http.Request) {
	var body outgoing
	if err := decode(r, &body); err != nil {
		reply(w, 400, apiError{Message: "400: Bad Request", Code: 50109})
		return
	}
	s.mu.Lock()
	in := s.webhookInteraction(r.PathValue("app"), r.PathValue("token"))
	if in == nil || !in.responded {
		s.mu.Unlock()
		reply(w, 401, apiError{Message: "Invalid Webhook Token", Code: 50027})
		return
	}
	id, ch := in.id, in.channelID
	s.mu.Unlock()
	if !checkContent(w, body.Content) {
		return
	}
	reply(w, 200, s.store(ch, body, "followup", id))
}
