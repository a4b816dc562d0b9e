package orchestrator

import (
	"context"

	"github.com/opentalon/opentalon/core"
)

// refs are attachments as the history keeps them: without their content.
func refs(as []core.Attachment) []core.Attachment {
	if len(as) == 0 {
		return nil
	}
	out := make([]core.Attachment, len(as))
	for i, a := range as {
		a.Data = nil
		out[i] = a
	}
	return out
}

// hasImages says whether the message being answered (the last user
// message) shows images: then only a model that sees may answer.
func hasImages(h []core.ChatMessage) bool {
	i := lastUser(h)
	if i < 0 {
		return false
	}
	for _, a := range h[i].Attachments {
		if a.Kind == core.MediaImage {
			return true
		}
	}
	return false
}

func lastUser(h []core.ChatMessage) int {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == core.RoleUser {
			return i
		}
	}
	return -1
}

// loadImages returns h with the content of the images of the message
// being answered read from the media store; older images stay
// references (the model sees a placeholder line). An image no longer
// kept is dropped with a note in the log.
func (o *Orchestrator) loadImages(ctx context.Context, h []core.ChatMessage) []core.ChatMessage {
	i := lastUser(h)
	if i < 0 || len(h[i].Attachments) == 0 || o.o.Media == nil {
		return h
	}
	out := append([]core.ChatMessage(nil), h...)
	m := out[i]
	m.Attachments = append([]core.Attachment(nil), m.Attachments...)
	for j, a := range m.Attachments {
		if a.Kind != core.MediaImage || a.SHA256 == "" {
			continue
		}
		data, err := o.o.Media.ReadMedia(ctx, a.SHA256)
		if err != nil {
			o.log.Warn("an image of the message could not be read from the media store", "sha256", a.SHA256, "err", err)
			continue
		}
		m.Attachments[j].Data = data
	}
	out[i] = m
	return out
}
