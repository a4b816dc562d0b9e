package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

// TestImageWithoutTextHasNoEmptyTextPart: a photo sent with no caption
// is a user message of the image alone, in both formats. Before, the
// OpenAI format sent a text part without its required text
// ({"type":"text"}), which the API refuses (and an empty text block is
// what Anthropic refuses: "text content blocks must be non-empty").
func TestImageWithoutTextHasNoEmptyTextPart(t *testing.T) {
	jpg := []byte("\xff\xd8\xff\xe0 not really a jpeg")
	req := &Request{Model: "m", Messages: []core.ChatMessage{
		{Role: core.RoleUser, Attachments: []core.Attachment{{Kind: core.MediaImage, Name: "photo.jpg", MIME: "image/jpeg", Data: jpg}}},
	}}
	for _, f := range flavors() {
		s, p := setup(t, f, Options{})
		if _, err := p.Complete(context.Background(), Credentials{}, req); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Last()
		body := string(got.Body)
		if strings.Contains(body, `"text":""`) || strings.Contains(body, `{"type":"text"}`) {
			t.Errorf("%s: the request has an empty text part: %s", f.name, body)
		}
		if len(got.Messages) != 1 || len(got.Messages[0].Attachments) != 1 {
			t.Errorf("%s: messages %+v; want the image alone", f.name, got.Messages)
		}
	}
}
