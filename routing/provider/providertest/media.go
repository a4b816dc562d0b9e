package providertest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// imageParts decodes the image_url parts of an OpenAI content array
// (data: URLs) into attachments with their bytes.
func imageParts(raw json.RawMessage) ([]core.Attachment, error) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, err
	}
	var out []core.Attachment
	for _, p := range parts {
		if p.Type != "image_url" {
			continue
		}
		if p.ImageURL == nil {
			return nil, fmt.Errorf("image_url part without image_url")
		}
		head, data, ok := strings.Cut(p.ImageURL.URL, ",")
		mt, isB64 := strings.CutSuffix(strings.TrimPrefix(head, "data:"), ";base64")
		if !ok || !strings.HasPrefix(head, "data:") || !isB64 {
			return nil, fmt.Errorf("image_url: want a base64 data: URL")
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("image_url: %w", err)
		}
		out = append(out, core.Attachment{Kind: core.MediaImage, MIME: mt, Size: int64(len(b)), Data: b})
	}
	return out, nil
}

// decodeTranscription reads a multipart POST /audio/transcriptions.
func decodeTranscription(r *Received) error {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return fmt.Errorf("want multipart/form-data with a file")
	}
	mr := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(p)
		switch p.FormName() {
		case "model":
			r.Model = string(b)
		case "file":
			r.Audio, r.AudioName = b, p.FileName()
		}
	}
	if r.Audio == nil {
		r.Audio = nil
		return fmt.Errorf("file: required")
	}
	if r.Model == "" {
		return fmt.Errorf("model: required")
	}
	return nil
}
