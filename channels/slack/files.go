package slack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

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
		if url == "" && f.FileAccess == "check_file_info" && f.ID != "" && !f.IsExternal {
			// A stub (a file shared over Slack Connect): only its id is
			// known, Fetch asks files.info for the rest.
			out = append(out, core.InboundFile{ID: f.ID, Kind: core.MediaDocument})
			continue
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
// the bot token, from Slack's file host (or the api_url host) only (a
// stub's URL from files.info first).
// Slack answers a token without the files:read scope with its sign-in
// page (200, HTML) instead of the file: that is an error naming the
// scope, never the file's content.
func (b *Bot) Fetch(ctx context.Context, f core.InboundFile, w io.Writer, limit int64) error {
	url := f.ID
	if !strings.Contains(url, "://") {
		// A stub's file id: its URL, type and size come from files.info.
		info, _, _, err := b.api.GetFileInfoContext(ctx, f.ID, 0, 0)
		if err != nil {
			return b.classify("files.info", keyBotToken, err)
		}
		if url = info.URLPrivateDownload; url == "" {
			url = info.URLPrivate
		}
		if url == "" || info.IsExternal {
			return core.Errorf(core.KindInvalid, "Slack gives me no download of the file %s", info.Name)
		}
		if info.Size > 0 && int64(info.Size) > limit {
			return core.ErrTooLarge
		}
		f.Name, f.MIME = info.Name, info.Mimetype
	}
	err := toolkit.Fetch(ctx, toolkit.Download{
		Client: b.http, URL: url,
		Hosts:  []string{slackFileHost, toolkit.HostOf(b.cfg.APIURL)},
		Header: http.Header{"Authorization": {"Bearer " + b.cfg.BotToken.Value()}},
		Check:  func(resp *http.Response) error { return signInPage(f, resp) },
	}, w, limit)
	return b.scrubber.Error(err)
}

// signInPage is the error of a download Slack answered with a web page
// although the file is no HTML: the bot token may not read files.
func signInPage(f core.InboundFile, resp *http.Response) error {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/html" || strings.EqualFold(f.MIME, "text/html") || strings.HasSuffix(strings.ToLower(f.Name), ".html") {
		return nil
	}
	name := f.Name
	if name == "" {
		name = "the file"
	}
	return &core.Error{Kind: core.KindInvalid,
		Msg: fmt.Sprintf("Slack sent me a sign-in page instead of %s, so I could not read it. The operator has been told (see the log).", name),
		Err: errors.New("slack: a file download was answered with a web page: the bot token lacks the files:read scope (add it under OAuth & Permissions in the app's settings, then reinstall the app)")}
}
