package provider

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The transcript is read from the JSON we ask for, whether or not the
// server labels it, and a server that answers plain text is read as text.
func TestTranscribeAnswers(t *testing.T) {
	for _, tt := range []struct {
		name, contentType, body string
	}{
		{"labelled JSON", "application/json", `{"text":" turn on the lights "}`},
		{"unlabelled JSON", "", `{"text":"turn on the lights"}`},
		{"plain text", "text/plain", "turn on the lights\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/audio/transcriptions" || r.Header.Get("Authorization") != "Bearer k" {
					http.Error(w, "wrong request", http.StatusBadRequest)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			p := NewOpenAI(Options{BaseURL: srv.URL + "/v1"})
			got, err := p.Transcribe(context.Background(), Credentials{APIKey: "k"}, &TranscribeRequest{Model: "whisper-1", MIME: "audio/ogg", Data: []byte("OggS")})
			if err != nil || got != "turn on the lights" {
				t.Fatalf("Transcribe = %q, %v; want the transcript", got, err)
			}
		})
	}
}
