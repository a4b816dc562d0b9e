package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
)

// TranscribeRequest is one audio file to turn into text.
type TranscribeRequest struct {
	// Model is the provider's own model id ("whisper-1").
	Model string
	// Name and MIME describe the file; Data is its content.
	Name, MIME string
	Data       []byte
}

// Transcriber is the optional Provider capability of speech to text.
type Transcriber interface {
	Transcribe(ctx context.Context, cred Credentials, req *TranscribeRequest) (string, error)
}

var _ Transcriber = (*OpenAI)(nil)

// Transcribe sends the audio to POST {base}/audio/transcriptions, the
// OpenAI API that whisper servers (whisper.cpp, faster-whisper, vLLM)
// speak too, and returns the text.
func (p *OpenAI) Transcribe(ctx context.Context, cred Credentials, req *TranscribeRequest) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("model", req.Model)
	_ = mw.WriteField("response_format", "json")
	name := req.Name
	if name == "" {
		name = "audio" + audioExt(req.MIME)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+strings.NewReplacer(`"`, "", "\r", "", "\n", "").Replace(name)+`"`)
	if req.MIME != "" {
		h.Set("Content-Type", req.MIME)
	}
	fw, err := mw.CreatePart(h)
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(req.Data); err != nil {
		return "", err
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	cl, err := p.c.postBody(ctx, "/audio/transcriptions", mw.FormDataContentType(), body.Bytes(), cred.APIKey, nil, func(h http.Header) {
		if cred.APIKey != "" {
			h.Set("Authorization", "Bearer "+cred.APIKey)
		}
	})
	if err != nil {
		return "", err
	}
	defer cl.close()
	b, err := p.c.readBody(cl, cred.APIKey)
	if err != nil {
		return "", err
	}
	var out struct {
		Text string `json:"text"`
	}
	// We ask for JSON ({"text": …}); a server that sends it without
	// saying so is read as JSON too, one that answers plain text as text.
	isJSON := strings.HasPrefix(cl.resp.Header.Get("Content-Type"), "application/json")
	if trimmed := bytes.TrimSpace(b); isJSON || bytes.HasPrefix(trimmed, []byte("{")) && json.Valid(trimmed) {
		if err := json.Unmarshal(b, &out); err != nil {
			return "", malformed(p.c.id, "transcription is not JSON", err, cred.APIKey)
		}
		return strings.TrimSpace(out.Text), nil
	}
	return strings.TrimSpace(string(b)), nil // a server that answers text
}

// audioExt is a file extension servers recognize for a MIME type.
func audioExt(mime string) string {
	switch mime {
	case "audio/ogg", "audio/opus", "application/ogg":
		return ".ogg"
	case "audio/mpeg", "audio/mp3":
		return ".mp3"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/mp4", "audio/m4a", "audio/x-m4a":
		return ".m4a"
	case "audio/webm":
		return ".webm"
	}
	return ".ogg"
}
