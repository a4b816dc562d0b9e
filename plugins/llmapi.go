package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/opentalon/opentalon/core"
)

// GeneratePath is where NewGenerateHandler is meant to be mounted.
const GeneratePath = "/api/plugins/llm/generate"

// GenerateRequest is the body of POST /api/plugins/llm/generate.
type GenerateRequest struct {
	Messages []GenerateMessage `json:"messages"`
	LLMName  *string           `json:"llm_name"`
}

// GenerateMessage is one message of a GenerateRequest.
type GenerateMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// GenerateResponse is the answer: Text on success, Error otherwise.
type GenerateResponse struct {
	Text  string `json:"text,omitempty"`
	Error string `json:"error,omitempty"`
}

// MarshalJSON writes {"error": …} for a failure and {"text": …} for a
// success, "text" present even when empty (a client reads it by key).
func (g GenerateResponse) MarshalJSON() ([]byte, error) {
	if g.Error != "" {
		return json.Marshal(struct {
			Error string `json:"error"`
		}{g.Error})
	}
	return json.Marshal(struct {
		Text string `json:"text"`
	}{g.Text})
}

// maxGenerateBody caps the request body.
const maxGenerateBody = 4 << 20

// NewGenerateHandler serves POST /api/plugins/llm/generate. Requests must
// present a key of keys (server.api_key, or a plugin's own credential) as
// X-API-Key or "Authorization: Bearer <key>"; with no key configured every
// request is refused (the endpoint is never open).
func NewGenerateHandler(gen core.Generator, keys Keys, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "plugin-llm-api")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeGenerate(w, http.StatusMethodNotAllowed, GenerateResponse{Error: "use POST " + GeneratePath})
			return
		}
		if !keys.any() {
			writeGenerate(w, http.StatusUnauthorized, GenerateResponse{Error: "the plugin LLM API is disabled: set server.api_key (e.g. api_key: \"${OPENTALON_API_KEY}\") to enable it"})
			return
		}
		plugin, _, ok := keys.caller(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="opentalon"`)
			writeGenerate(w, http.StatusUnauthorized, GenerateResponse{Error: "missing or wrong API key: a plugin sends the OPENTALON_API_KEY it was started with (the operator server.api_key) as the X-API-Key header or as Authorization: Bearer <key>"})
			return
		}
		var req GenerateRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxGenerateBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeGenerate(w, http.StatusBadRequest, GenerateResponse{Error: fmt.Sprintf("invalid request body: %v; expected {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}], \"llm_name\": null}", err)})
			return
		}
		msgs, err := req.chatMessages()
		if err != nil {
			writeGenerate(w, http.StatusBadRequest, GenerateResponse{Error: err.Error()})
			return
		}
		model := ""
		if req.LLMName != nil {
			model = *req.LLMName
		}
		out, err := gen.Generate(r.Context(), core.GenerateRequest{Messages: msgs, Model: model, Purpose: "plugin"})
		if err != nil {
			status := http.StatusBadGateway
			switch core.ErrorKind(err) {
			case core.KindInvalid, core.KindNotFound:
				status = http.StatusBadRequest
			case core.KindRateLimited:
				status = http.StatusTooManyRequests
			case core.KindTimeout:
				status = http.StatusGatewayTimeout
			}
			if errors.Is(r.Context().Err(), context.Canceled) {
				return
			}
			log.Warn("plugin LLM call failed", "plugin", plugin, "model", model, "err", err)
			writeGenerate(w, status, GenerateResponse{Error: publicError(err)})
			return
		}
		writeGenerate(w, http.StatusOK, GenerateResponse{Text: out.Text})
	})
}

func (r GenerateRequest) chatMessages() ([]core.ChatMessage, error) {
	if len(r.Messages) == 0 {
		return nil, errors.New(`"messages" is empty: send at least one {"role": "user", "content": "..."}`)
	}
	out := make([]core.ChatMessage, 0, len(r.Messages))
	for i, m := range r.Messages {
		role := core.Role(m.Role)
		switch role {
		case core.RoleSystem, core.RoleUser, core.RoleAssistant:
		default:
			return nil, fmt.Errorf("messages[%d].role is %q: use system, user or assistant", i, m.Role)
		}
		out = append(out, core.ChatMessage{Role: role, Content: m.Content})
	}
	return out, nil
}

// publicError is the message safe to return: a core.Error's Msg (written
// for users), else a generic line.
func publicError(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) && ce.Msg != "" {
		return ce.Msg
	}
	return "the LLM call failed; see the OpenTalon log"
}

func writeGenerate(w http.ResponseWriter, status int, body GenerateResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
