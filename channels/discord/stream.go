package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/opentalon/opentalon/channels/textfmt"
	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

var (
	_ core.Streamer = (*Bot)(nil)
	_ core.Deleter  = (*Bot)(nil)
	_ core.Uploader = (*Bot)(nil)
	_ core.Fetcher  = (*Bot)(nil)
)

// editInterval is the least time between two edits of a streamed
// message: Discord allows about five message edits per five seconds in a
// channel; discordgo waits out its rate limit buckets on top.
const editInterval = time.Second

// maxUpload is what Discord takes from a bot in a channel without boosts
// (10 MiB per file).
const maxUpload = 10 << 20

// The hosts Discord serves attachments from.
var cdnHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

// Streaming implements core.Streamer: channels.discord.streaming; Discord
// has no streaming API of its own, so native edits. An application
// command's answer (a deferred interaction response) is not streamed.
func (b *Bot) Streaming(to core.Outbound) core.StreamPolicy {
	if to.Meta[metaInteraction] != "" {
		return core.StreamPolicy{Mode: core.StreamOff}
	}
	return toolkit.StreamPolicy(b.cfg.Streaming, false, editInterval)
}

// Draft implements core.Streamer.
func (b *Bot) Draft(text string) []core.DraftPart {
	return textfmt.Draft(text, MaxMessage, textfmt.ToDiscord, nil)
}

// Edit implements core.Streamer: PATCH the bot's message.
func (b *Bot) Edit(ctx context.Context, to core.Outbound, id, part string) error {
	ch := target(to.Conversation)
	return b.retry(ctx, "edit a message", func(ctx context.Context) error {
		_, err := b.rest.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: ch, Content: &part, AllowedMentions: noPings(false)}, discordgo.WithContext(ctx))
		if err != nil {
			return b.classify("PATCH /channels/{id}/messages/{id}", err)
		}
		return nil
	})
}

// Delete implements core.Deleter.
func (b *Bot) Delete(ctx context.Context, to core.Outbound, id string) error {
	ch := target(to.Conversation)
	return b.retry(ctx, "delete a message", func(ctx context.Context) error {
		if err := b.rest.ChannelMessageDelete(ch, id, discordgo.WithContext(ctx)); err != nil {
			return b.classify("DELETE /channels/{id}/messages/{id}", err)
		}
		return nil
	})
}

// MaxUpload implements core.Uploader.
func (b *Bot) MaxUpload(core.Attachment) int64 { return maxUpload }

// Upload implements core.Uploader: a message with the file attached
// (multipart), replying to the user's message when it is the answer's
// first part.
func (b *Bot) Upload(ctx context.Context, to core.Outbound, f core.Attachment) (string, error) {
	ch := target(to.Conversation)
	msg := &discordgo.MessageSend{AllowedMentions: noPings(false)}
	if to.Part == 0 && to.ReplyTo != "" && to.Meta[metaInteraction] == "" {
		no := false
		msg.Reference = &discordgo.MessageReference{MessageID: to.ReplyTo, ChannelID: ch, FailIfNotExists: &no}
	}
	// One nonce for every attempt, as Send does.
	body := nonceSend{MessageSend: msg, Nonce: newNonce(), EnforceNonce: true}
	endpoint := discordgo.EndpointChannelMessages(ch)
	defer b.typing.Quiet(ctx, ch)()
	var sent *discordgo.Message
	err := b.retry(ctx, "send a file", func(ctx context.Context) error {
		files := []*discordgo.File{{Name: f.Name, ContentType: f.MIME, Reader: bytes.NewReader(f.Data)}}
		contentType, payload, err := discordgo.MultipartBodyWithJSON(body, files)
		if err != nil {
			return err
		}
		raw, err := b.rest.RequestRaw(http.MethodPost, endpoint, contentType, payload, endpoint, 0, discordgo.WithContext(ctx))
		if err != nil {
			return b.classify("POST /channels/{id}/messages (file)", err)
		}
		var m discordgo.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("POST /channels/{id}/messages (file): unreadable answer: %w", err)
		}
		sent = &m
		return nil
	})
	if err != nil {
		return "", err
	}
	return sent.ID, nil
}

// Fetch implements core.Fetcher: the attachment's URL, from Discord's CDN
// (or the api_url host) only.
func (b *Bot) Fetch(ctx context.Context, f core.InboundFile, w io.Writer, limit int64) error {
	return b.scrub(toolkit.Fetch(ctx, toolkit.Download{Client: b.http, URL: f.ID, Hosts: append([]string{b.root.Host}, cdnHosts...)}, w, limit))
}

// stickerFiles turns a message's stickers into core's files: a PNG,
// APNG or GIF sticker is an image on Discord's media CDN (on the api_url
// host when one is set); a Lottie one is a file of its own type, which
// the user is told cannot be read.
func (b *Bot) stickerFiles(items []*discordgo.StickerItem) []core.InboundFile {
	base := "https://media.discordapp.net"
	if b.root.Host != "discord.com" {
		base = b.root.Scheme + "://" + b.root.Host
	}
	var out []core.InboundFile
	for _, st := range items {
		if st == nil || st.ID == "" {
			continue
		}
		ext, mime, kind := "png", "image/png", core.MediaImage
		switch st.FormatType {
		case discordgo.StickerFormatTypeGIF:
			ext, mime = "gif", "image/gif"
		case discordgo.StickerFormatTypeLottie:
			ext, mime, kind = "json", "application/x-lottie", core.MediaDocument
		}
		out = append(out, core.InboundFile{ID: base + "/stickers/" + url.PathEscape(st.ID) + "." + ext, Kind: kind, Name: "sticker." + ext, MIME: mime})
	}
	return out
}

// attachments turns a message's attachments into core's files.
func attachments(as []*discordgo.MessageAttachment) []core.InboundFile {
	var out []core.InboundFile
	for _, a := range as {
		if a == nil || a.URL == "" {
			continue
		}
		out = append(out, core.InboundFile{ID: a.URL, Kind: core.KindOfMIME(a.ContentType), Name: a.Filename, MIME: a.ContentType, Size: int64(a.Size)})
	}
	return out
}
