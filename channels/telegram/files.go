package telegram

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

var (
	_ core.Uploader = (*Bot)(nil)
	_ core.Fetcher  = (*Bot)(nil)
)

// The Bot API's upload limits: photos up to 10 MB, other files 50 MB.
const (
	maxPhoto    = 10 << 20
	maxDocument = 50 << 20
)

// asPhoto says whether a file goes out with sendPhoto (else
// sendDocument): an image Telegram shows inline, within the photo limit.
func asPhoto(f core.Attachment) bool {
	switch f.MIME {
	case "image/jpeg", "image/png", "image/webp":
		return int64(len(f.Data)) <= maxPhoto || f.Size <= maxPhoto && f.Data == nil
	}
	return false
}

// MaxUpload implements core.Uploader: an image too large for a photo
// still goes as a document.
func (b *Bot) MaxUpload(core.Attachment) int64 { return maxDocument }

// Upload implements core.Uploader: sendPhoto for a JPEG, PNG or WebP
// image within 10 MB, else sendDocument; in the conversation's topic,
// quoting the user's message when the file is the answer's first part.
func (b *Bot) Upload(ctx context.Context, to core.Outbound, f core.Attachment) (string, error) {
	chat, err := strconv.ParseInt(to.Conversation.Chat, 10, 64)
	if err != nil {
		return "", core.Errorf(core.KindInvalid, "telegram: conversation %s has no numeric chat id", to.Conversation)
	}
	thread, _ := strconv.Atoi(to.Conversation.Thread)
	var reply *models.ReplyParameters
	if to.Part == 0 && to.ReplyTo != "" {
		if _, msg, ok := parsePlatformID(to.ReplyTo); ok {
			reply = &models.ReplyParameters{MessageID: msg, AllowSendingWithoutReply: true}
		}
	}
	group := to.Meta["chat_type"] != "" && to.Meta["chat_type"] != string(models.ChatTypePrivate)
	var m *models.Message
	method := "sendDocument"
	if asPhoto(f) {
		method = "sendPhoto"
	}
	defer b.typing.Quiet(ctx, typingPlace(to.Conversation))()
	// raw is Telegram's own refusal, which decides (the error b.call
	// returns is scrubbed, and a short webhook secret may be in its words).
	var raw error
	send := func(ctx context.Context) error {
		file := &models.InputFileUpload{Filename: f.Name, Data: bytes.NewReader(f.Data)}
		var err error
		if method == "sendPhoto" {
			m, err = b.api.SendPhoto(ctx, &tgbot.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: file, ReplyParameters: reply})
		} else {
			m, err = b.api.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: file, ReplyParameters: reply})
		}
		raw = err
		return err
	}
	err = b.call(ctx, to.Conversation.Chat, group, method, send)
	if err != nil && thread != 0 && topicGone(raw) {
		// The topic was deleted: the file goes where Send puts the text.
		b.log.Info("the forum topic of the conversation is gone; sending the file in the chat's General topic", "chat", chat, "topic", thread)
		thread = 0
		err = b.call(ctx, to.Conversation.Chat, group, method, send)
	}
	if err != nil {
		return "", err
	}
	return platformID(chat, m.ID), nil
}

// maxDownload is the largest file the Bot API's getFile serves a bot
// (a local Bot API server, set with api_url, serves larger ones).
const maxDownload = 20 << 20

// Fetch implements core.Fetcher: getFile, then the file from the Bot
// API's own file host (api_url), within limit bytes. Telegram's getFile
// serves files up to 20 MB: a larger one is a core.PlatformLimit, so the
// user hears Telegram's limit, not media.max_bytes.
func (b *Bot) Fetch(ctx context.Context, f core.InboundFile, w io.Writer, limit int64) error {
	info, err := b.api.GetFile(ctx, &tgbot.GetFileParams{FileID: f.ID})
	if err != nil {
		// Telegram's own words (the classified error's text is scrubbed).
		tooBig := strings.Contains(strings.ToLower(err.Error()), "file is too big")
		err = b.classify("getFile", err)
		if tooBig {
			return &core.PlatformLimit{Platform: "Telegram", Max: maxDownload}
		}
		return err
	}
	if info.FileSize > limit {
		return core.ErrTooLarge
	}
	err = toolkit.Fetch(ctx, toolkit.Download{
		Client: b.http, URL: b.api.FileDownloadLink(info), Hosts: []string{toolkit.HostOf(b.cfg.APIURL)},
	}, w, limit)
	return b.scrub(err)
}

// files lists the files a message carries: the largest size of a photo,
// a document, a voice note or an audio file, a sticker (a static one is
// a WebP image; an animated or video one is shown by its still
// thumbnail, as a GIF is), and a video or video note (kept as a file of a video type,
// so the user hears it cannot be read rather than nothing at all).
func files(m *models.Message) []core.InboundFile {
	var out []core.InboundFile
	if n := len(m.Photo); n > 0 {
		p := m.Photo[n-1] // sizes come smallest first
		out = append(out, core.InboundFile{ID: p.FileID, Kind: core.MediaImage, Name: "photo.jpg", MIME: "image/jpeg", Size: int64(p.FileSize)})
	}
	if a := m.Animation; a != nil && a.Thumbnail != nil {
		// A GIF (Telegram makes it a silent MP4, sent as a document too)
		// is shown by its still thumbnail, as an animated sticker is.
		t := a.Thumbnail
		out = append(out, core.InboundFile{ID: t.FileID, Kind: core.MediaImage, Name: "animation.jpg", MIME: "image/jpeg", Size: int64(t.FileSize)})
	} else if d := m.Document; d != nil {
		out = append(out, core.InboundFile{ID: d.FileID, Kind: core.KindOfMIME(d.MimeType), Name: d.FileName, MIME: d.MimeType, Size: d.FileSize})
	}
	if v := m.Voice; v != nil {
		mime := v.MimeType
		if mime == "" {
			mime = "audio/ogg"
		}
		out = append(out, core.InboundFile{ID: v.FileID, Kind: core.MediaAudio, Name: "voice.ogg", MIME: mime, Size: v.FileSize})
	}
	if a := m.Audio; a != nil {
		out = append(out, core.InboundFile{ID: a.FileID, Kind: core.MediaAudio, Name: a.FileName, MIME: a.MimeType, Size: a.FileSize})
	}
	if s := m.Sticker; s != nil {
		out = append(out, sticker(s))
	}
	if v := m.Video; v != nil && m.Document == nil {
		name, mime := v.FileName, v.MimeType
		if mime == "" {
			mime = "video/mp4"
		}
		if name == "" {
			name = "video.mp4"
		}
		out = append(out, core.InboundFile{ID: v.FileID, Kind: core.MediaDocument, Name: name, MIME: mime, Size: v.FileSize})
	}
	if v := m.VideoNote; v != nil {
		out = append(out, core.InboundFile{ID: v.FileID, Kind: core.MediaDocument, Name: "video_note.mp4", MIME: "video/mp4", Size: int64(v.FileSize)})
	}
	return out
}

// sticker is the file a sticker is read as: a static sticker is a WebP
// image; an animated (TGS) or video (WebM) one is its still thumbnail
// when Telegram gives one, else a file of its own type (which cannot be
// read, and the user is told so).
func sticker(s *models.Sticker) core.InboundFile {
	switch {
	case !s.IsAnimated && !s.IsVideo:
		return core.InboundFile{ID: s.FileID, Kind: core.MediaImage, Name: "sticker.webp", MIME: "image/webp", Size: int64(s.FileSize)}
	case s.Thumbnail != nil:
		// A thumbnail is WebP or JPEG; the media reader takes the format
		// its bytes show.
		t := s.Thumbnail
		return core.InboundFile{ID: t.FileID, Kind: core.MediaImage, Name: "sticker.webp", MIME: "image/webp", Size: int64(t.FileSize)}
	case s.IsVideo:
		return core.InboundFile{ID: s.FileID, Kind: core.MediaDocument, Name: "sticker.webm", MIME: "video/webm", Size: int64(s.FileSize)}
	}
	return core.InboundFile{ID: s.FileID, Kind: core.MediaDocument, Name: "sticker.tgs", MIME: "application/x-tgsticker", Size: int64(s.FileSize)}
}
