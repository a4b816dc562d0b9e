package provider

import (
	"encoding/base64"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// images returns the images of m whose content is loaded: those go to
// the model as image inputs.
func images(m core.ChatMessage) []core.Attachment {
	var out []core.Attachment
	for _, a := range m.Attachments {
		if a.Kind == core.MediaImage && len(a.Data) > 0 {
			out = append(out, a)
		}
	}
	return out
}

// withPlaceholders is m's text with a line for each attachment whose
// content is not sent (an image of an earlier turn), so the model knows
// it was there.
func withPlaceholders(m core.ChatMessage) string {
	if len(m.Attachments) == 0 {
		return m.Content // most messages: the text as it is, not a copy
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, a := range m.Attachments {
		if len(a.Data) > 0 && a.Kind == core.MediaImage {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		name := a.Name
		if name == "" {
			name = a.MIME
		}
		b.WriteString("[" + string(a.Kind) + ": " + name + "]")
	}
	return b.String()
}

// dataURL is an image inline as a data: URL (OpenAI's image_url).
func dataURL(a core.Attachment) string {
	return "data:" + a.MIME + ";base64," + base64.StdEncoding.EncodeToString(a.Data)
}
