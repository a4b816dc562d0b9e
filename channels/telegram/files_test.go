package telegram

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/telegram/telegramtest"
	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// TestFilesOfEveryKindOfMessage: what a Telegram user can send with no
// text is a file the gateway answers (read, or refused with a reason),
// never a message dropped as empty; a photo is read at its largest size.
func TestFilesOfEveryKindOfMessage(t *testing.T) {
	thumb := &models.PhotoSize{FileID: "thumb", FileSize: 900}
	tests := []struct {
		name string
		msg  models.Message
		want []core.InboundFile
	}{
		{name: "photo at its largest size", msg: models.Message{Photo: []models.PhotoSize{{FileID: "s", FileSize: 10}, {FileID: "m", FileSize: 100}, {FileID: "l", FileSize: 1000}}},
			want: []core.InboundFile{{ID: "l", Kind: core.MediaImage, Name: "photo.jpg", MIME: "image/jpeg", Size: 1000}}},
		{name: "image sent as a file", msg: models.Message{Document: &models.Document{FileID: "d", FileName: "scan.png", MimeType: "image/png", FileSize: 5}},
			want: []core.InboundFile{{ID: "d", Kind: core.MediaImage, Name: "scan.png", MIME: "image/png", Size: 5}}},
		{name: "static sticker is a WebP image", msg: models.Message{Sticker: &models.Sticker{FileID: "st", FileSize: 20, Thumbnail: thumb}},
			want: []core.InboundFile{{ID: "st", Kind: core.MediaImage, Name: "sticker.webp", MIME: "image/webp", Size: 20}}},
		{name: "animated sticker is its thumbnail", msg: models.Message{Sticker: &models.Sticker{FileID: "tgs", IsAnimated: true, Thumbnail: thumb}},
			want: []core.InboundFile{{ID: "thumb", Kind: core.MediaImage, Name: "sticker.webp", MIME: "image/webp", Size: 900}}},
		{name: "video sticker is its thumbnail", msg: models.Message{Sticker: &models.Sticker{FileID: "webm", IsVideo: true, Thumbnail: thumb}},
			want: []core.InboundFile{{ID: "thumb", Kind: core.MediaImage, Name: "sticker.webp", MIME: "image/webp", Size: 900}}},
		{name: "video sticker without a thumbnail", msg: models.Message{Sticker: &models.Sticker{FileID: "webm", IsVideo: true, FileSize: 7}},
			want: []core.InboundFile{{ID: "webm", Kind: core.MediaDocument, Name: "sticker.webm", MIME: "video/webm", Size: 7}}},
		{name: "animated sticker without a thumbnail", msg: models.Message{Sticker: &models.Sticker{FileID: "tgs", IsAnimated: true}},
			want: []core.InboundFile{{ID: "tgs", Kind: core.MediaDocument, Name: "sticker.tgs", MIME: "application/x-tgsticker"}}},
		{name: "video", msg: models.Message{Video: &models.Video{FileID: "v", FileSize: 3}},
			want: []core.InboundFile{{ID: "v", Kind: core.MediaDocument, Name: "video.mp4", MIME: "video/mp4", Size: 3}}},
		{name: "video note", msg: models.Message{VideoNote: &models.VideoNote{FileID: "vn", FileSize: 4}},
			want: []core.InboundFile{{ID: "vn", Kind: core.MediaDocument, Name: "video_note.mp4", MIME: "video/mp4", Size: 4}}},
		// Telegram sets document beside animation (a GIF is an MP4): one
		// file, the animation's still thumbnail when it has one.
		{name: "GIF is its thumbnail, once", msg: models.Message{
			Animation: &models.Animation{FileID: "a", FileName: "cat.gif.mp4", MimeType: "video/mp4", Thumbnail: thumb},
			Document:  &models.Document{FileID: "a", FileName: "cat.gif.mp4", MimeType: "video/mp4"}},
			want: []core.InboundFile{{ID: "thumb", Kind: core.MediaImage, Name: "animation.jpg", MIME: "image/jpeg", Size: 900}}},
		{name: "GIF without a thumbnail is its document", msg: models.Message{
			Animation: &models.Animation{FileID: "a", FileName: "cat.gif.mp4", MimeType: "video/mp4"},
			Document:  &models.Document{FileID: "a", FileName: "cat.gif.mp4", MimeType: "video/mp4"}},
			want: []core.InboundFile{{ID: "a", Kind: core.MediaDocument, Name: "cat.gif.mp4", MIME: "video/mp4"}}},
		{name: "voice note", msg: models.Message{Voice: &models.Voice{FileID: "o", FileSize: 2}},
			want: []core.InboundFile{{ID: "o", Kind: core.MediaAudio, Name: "voice.ogg", MIME: "audio/ogg", Size: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := files(&tt.msg)
			if len(got) != len(tt.want) {
				t.Fatalf("files = %+v; want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("file %d = %+v; want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestStickerAndVideoNoteAreAnswered: a sticker or a video note alone in
// a private chat reaches the gateway (before, it was dropped as an empty
// message and the user heard nothing).
func TestStickerAndVideoNoteAreAnswered(t *testing.T) {
	h := newHarness(t, nil)
	for _, mod := range []func(*models.Message){
		func(m *models.Message) { m.Sticker = &models.Sticker{FileID: "st", Emoji: "👍"} },
		func(m *models.Message) { m.VideoNote = &models.VideoNote{FileID: "vn"} },
		func(m *models.Message) { m.Video = &models.Video{FileID: "v"} },
	} {
		u := h.srv.Private(alice, "")
		mod(u.Message)
		in, ok := h.bot.inbound(u.Message, nil)
		if !ok || len(in.Files) != 1 {
			t.Fatalf("inbound = %+v, %v; want the message with its file", in, ok)
		}
	}
}

// TestDeletedTopicGetsTheAnswerInTheChat: when the forum topic a question
// was asked in was deleted before the answer, Telegram refuses the topic
// ("message thread not found"); the answer's text and its files go to the
// chat (its General topic) instead of being lost.
func TestDeletedTopicGetsTheAnswerInTheChat(t *testing.T) {
	gone := telegramtest.Failure{Code: 400, Description: "Bad Request: message thread not found"}
	to := core.Outbound{Conversation: core.ConversationKey{Channel: Name, Chat: fmt.Sprint(groupID), Thread: "77"}, Meta: map[string]string{"chat_type": "supergroup"}}
	tests := []struct {
		method string
		send   func(b *Bot) error
	}{
		{"sendMessage", func(b *Bot) error { _, err := b.Send(context.Background(), to, "the answer"); return err }},
		{"sendDocument", func(b *Bot) error {
			_, err := b.Upload(context.Background(), to, core.Attachment{Name: "notes.txt", MIME: "text/plain", Data: []byte("notes")})
			return err
		}},
		{"sendPhoto", func(b *Bot) error {
			_, err := b.Upload(context.Background(), to, core.Attachment{Name: "chart.png", MIME: "image/png", Data: []byte("png")})
			return err
		}},
	}
	// A webhook secret that is one of Telegram's words ("thread") is
	// scrubbed from error text; the bot still reads Telegram's refusal.
	for _, secret := range []string{"", "thread"} {
		for _, tc := range tests {
			t.Run(tc.method+"/secret="+secret, func(t *testing.T) {
				h := newHarness(t, func(c *config.Telegram, _ *Options) { c.Webhook.Secret = config.Secret(secret) })
				h.srv.Fail(tc.method, gone)
				if err := tc.send(h.bot); err != nil {
					t.Fatalf("%s to a deleted topic: %v; want it sent in the chat", tc.method, err)
				}
				calls := h.srv.Calls(tc.method)
				if len(calls) != 2 || calls[0].Params["message_thread_id"] != "77" || calls[1].Params["message_thread_id"] != "" {
					var got []string
					for _, c := range calls {
						got = append(got, c.Params["message_thread_id"])
					}
					t.Fatalf("%s calls' message_thread_id = %q; want 77, then none", tc.method, got)
				}
			})
		}
	}
}
