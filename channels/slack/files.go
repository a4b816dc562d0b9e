package slack

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/slack-go/slack"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

var (
	_ core.Uploader = (*Bot)(nil)
	_ core.Fetcher  = (*Bot)(nil)
)

// maxUpload is Slack's upload limit (1 GB).
const maxUpload = 1 << 30

// slackFileHost is where Slack serves the files users share.
const slackFileHost = "files.slack.com"

// inboundFiles turns the files a message shares into core's.
func inboundFiles(fs []slack.File) []core.InboundFile {
	var out []core.InboundFile
	for _, f := range fs {
		url := f.URLPrivateDownload
		if url == "" {
			url = f.URLPrivate
		}
		if url == "" || f.IsExternal {
			continue
		}
		out = append(out, core.InboundFile{ID: url, Kind: core.KindOfMIME(f.Mimetype), Name: f.Name, MIME: f.Mimetype, Size: int64(f.Size)})
	}
	return out
}

// MaxUpload implements core.Uploader.
func (b *Bot) MaxUpload(core.Attachment) int64 { return maxUpload }

// Upload implements core.Uploader with Slack's external upload flow:
// files.getUploadURLExternal, the bytes POSTed to the URL it gives,
// files.completeUploadExternal sharing the file in the reply's channel
// and thread. It returns "file:<file id>".
func (b *Bot) Upload(ctx context.Context, to core.Outbound, f core.Attachment) (string, error) {
	channel := to.Conversation.Chat
	var id string
	err := b.webCall(ctx, channel, "files.uploadV2", func(ctx context.Context) error {
		fs, err := b.api.UploadFileContext(ctx, slack.UploadFileParameters{
			Filename: f.Name, Title: f.Name, FileSize: len(f.Data), Reader: bytes.NewReader(f.Data),
			Channel: channel, ThreadTimestamp: replyThread(to),
		})
		if err != nil {
			return err
		}
		id = fs.ID
		return nil
	})
	if err != nil {
		return "", err
	}
	if t := replyThread(to); t != "" {
		b.answered.Add(threadKey(channel, t))
	}
	return "file:" + id, nil
}

// Fetch implements core.Fetcher: the file's url_private_download with
// the bot token, from Slack's file host (or the api_url host) only.
func (b *Bot) Fetch(ctx context.Context, f core.InboundFile, w io.Writer, limit int64) error {
	err := toolkit.Fetch(ctx, toolkit.Download{
		Client: b.http, URL: f.ID,
		Hosts:  []string{slackFileHost, toolkit.HostOf(b.cfg.APIURL)},
		Header: http.Header{"Authorization": {"Bearer " + b.cfg.BotToken.Value()}},
	}, w, limit)
	return b.scrubber.Error(err)
}
