package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opentalon/opentalon/core"
)

// saveReply stores the answer to a queue item, formatted for the channel,
// with the turn's history entries in one transaction. The files the
// tools made are stored first (in the media store) and checked against
// the platform's upload limit: one too large is named in the text
// instead.
func (g *Gateway) saveReply(ctx context.Context, ch core.Channel, requestID, sessionID int64, conv core.ConversationKey, ans *core.Answer) (*core.Reply, error) {
	files, notes, err := g.keepFiles(ctx, ch, ans.Files)
	if err != nil {
		return nil, err
	}
	text := core.CleanText(ans.Text) // a model may write a NUL byte too
	if notes != "" {
		text += "\n\n" + notes
	}
	r := &core.Reply{
		RequestID:    requestID,
		SessionID:    sessionID,
		Conversation: conv,
		Text:         text,
		Parts:        ch.Format(text),
		Files:        files,
		Model:        ans.Model,
		TaskType:     ans.TaskType,
		Reason:       ans.Reason,
		Usage:        ans.Usage,
		Metadata:     ans.Metadata,
		CreatedAt:    g.now(),
	}
	r.Sent = make([]string, len(r.Parts)+len(files))
	r.Draft = make([]bool, len(r.Sent))
	if r.ID, err = g.store.SaveReply(ctx, r, ans.Messages); err != nil {
		return nil, err
	}
	return r, nil
}

// keepFiles stores the files of an answer and keeps those the channel
// can send; notes names the others for the user.
func (g *Gateway) keepFiles(ctx context.Context, ch core.Channel, in []core.Attachment) (out []core.Attachment, notes string, err error) {
	if len(in) == 0 {
		return nil, "", nil
	}
	up, _ := ch.(core.Uploader)
	var lines []string
	for _, f := range in {
		f.Name = fileName(f.Name, f.MIME)
		if f.Size == 0 {
			f.Size = int64(len(f.Data))
		}
		switch {
		case up == nil:
			lines = append(lines, fmt.Sprintf("(%s was made, but files cannot be sent here.)", f.Name))
			continue
		case f.Size > up.MaxUpload(f):
			lines = append(lines, fmt.Sprintf("(%s is %s, more than the %s %s takes from a bot, so it was not sent.)",
				f.Name, byteSize(f.Size), byteSize(up.MaxUpload(f)), ch.Name()))
			continue
		}
		if f.SHA256 == "" {
			if f.SHA256, err = g.store.PutMedia(ctx, f.Data, f.MIME); err != nil {
				return nil, "", fmt.Errorf("store the file %s: %w", f.Name, err)
			}
		}
		out = append(out, f)
	}
	return out, strings.Join(lines, "\n"), nil
}

// fileName is the name a file a tool made is uploaded and named with: the
// last segment of name (a plugin may give a path, with either separator),
// without control or format characters (a right-to-left override would
// show "invoice\u202Efdp.exe" as "invoiceexe.pdf"); "file" plus mime's
// extension when nothing is left (Slack refuses an upload without a name).
func fileName(name, mime string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, name)
	if t := strings.TrimSpace(name); t != "" && t != "." && t != ".." {
		return name
	}
	mt, _, _ := strings.Cut(mime, ";")
	return "file" + extensionOf(strings.ToLower(strings.TrimSpace(mt)))
}

// extensionOf is the extension a nameless file gets for its MIME type
// (a fixed list: the system's tables differ between machines).
func extensionOf(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "application/pdf":
		return ".pdf"
	case "application/json":
		return ".json"
	case "application/zip":
		return ".zip"
	case "text/plain":
		return ".txt"
	case "text/csv":
		return ".csv"
	case "text/markdown":
		return ".md"
	case "audio/ogg":
		return ".ogg"
	case "audio/mpeg":
		return ".mp3"
	}
	return ""
}

// byteSize renders n bytes for a user ("20 MB").
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// shownParts is what a stream left on screen: the display form of each
// message it opened, and its native streams still open.
type shownParts struct {
	shown map[int]string
	open  map[int]core.NativeDraft
	// notBefore is when the platform's interval since the stream's last
	// update has passed: the final edit waits for it.
	notBefore time.Time
}

// deliver sends the parts and files of r not sent yet, recording each as
// it goes. A message a stream opened is edited to its final part (left
// alone when it shows it already); one the final text does not need is
// deleted. The channel's Send paces itself; it is called outside the
// workers.
//
// Each part's record is written before the next part is sent, so a
// process killed at any point after a send has recorded every part but
// the one sent last (the documented window: a part whose send completed
// just before the kill). With hold set (a store that is a
// core.SentFinisher), the record of the last part sent is left in *hold
// instead of written, for the item's finish to write with it; on an
// error every record is written.
func (g *Gateway) deliver(ctx context.Context, ch core.Channel, in core.Inbound, r *core.Reply, sp *shownParts, hold **core.PartSent) (err error) {
	awaitDurable(ctx)
	t0 := g.now()
	defer func() { g.obs.Stage(r.Conversation.Channel, core.StageDelivery, g.now().Sub(t0)) }()
	sctx := context.WithoutCancel(ctx)
	// pending is the last part sent, not recorded yet: it is written
	// before anything else is sent or recorded, and the end writes it or
	// hands it to hold.
	var pending *core.PartSent
	flush := func() error {
		if pending == nil {
			return nil
		}
		p := *pending
		pending = nil
		return g.store.MarkSent(sctx, p.ReplyID, p.Part, p.PlatformID)
	}
	markSent := func(i int, id string) {
		pending = &core.PartSent{ReplyID: r.ID, Part: i, Channel: r.Conversation.Channel, PlatformID: id}
	}
	defer func() {
		if hold != nil && err == nil {
			*hold = pending
			return
		}
		if ferr := flush(); err == nil {
			err = ferr
		}
	}()
	n := len(r.Parts)
	total := n + len(r.Files)
	for i, part := range r.Parts {
		id, draft := sent(r, i)
		if id != "" && !draft {
			continue
		}
		to := core.Outbound{Conversation: r.Conversation, ReplyTo: replyTo(in), Meta: in.Meta, Part: i, Parts: total}
		if err := flush(); err != nil {
			return err
		}
		if err := g.mayStillSend(ctx); err != nil {
			return fmt.Errorf("send part %d/%d: %w", i+1, n, err)
		}
		var err error
		if id == "" {
			id, err = ch.Send(ctx, to, part)
		} else {
			id, err = g.finalize(ctx, ch, to, id, part, i, sp)
		}
		if err != nil {
			return fmt.Errorf("send part %d/%d: %w", i+1, n, err)
		}
		if id == "" {
			id = "-"
		}
		markSent(i, id)
	}
	// Messages a stream opened beyond the final parts.
	for i := n; i < len(r.Sent); i++ {
		id, draft := sent(r, i)
		if id == "" || !draft {
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if d, ok := ch.(core.Deleter); ok {
			if err := d.Delete(ctx, core.Outbound{Conversation: r.Conversation, Meta: in.Meta, Part: i}, id); err != nil && core.ErrorKind(err) != core.KindBadRequest {
				return fmt.Errorf("delete streamed message %d: %w", i+1, err)
			}
		}
		if err := g.store.ForgetPart(sctx, r.ID, i); err != nil {
			return err
		}
		r.Sent[i], r.Draft[i] = "", false
	}
	for j, f := range r.Files {
		i := n + j
		if id, draft := sent(r, i); id != "" && !draft {
			continue
		}
		up, ok := ch.(core.Uploader)
		if !ok {
			break
		}
		if f.Data == nil {
			data, err := g.store.ReadMedia(ctx, f.SHA256)
			if err != nil {
				g.log.Warn("a file of the answer is gone from the media store; it is not sent", "file", f.Name, "err", err)
				continue
			}
			f.Data = data
		}
		to := core.Outbound{Conversation: r.Conversation, ReplyTo: replyTo(in), Meta: in.Meta, Part: i, Parts: total}
		if err := flush(); err != nil {
			return err
		}
		if err := g.mayStillSend(ctx); err != nil {
			return fmt.Errorf("send file %s: %w", f.Name, err)
		}
		id, err := up.Upload(ctx, to, f)
		if err != nil {
			return fmt.Errorf("send file %s: %w", f.Name, err)
		}
		if id == "" {
			id = "-"
		}
		markSent(i, id)
	}
	return nil
}

// sent returns the id of r's part i's message and whether it shows a
// draft.
func sent(r *core.Reply, i int) (string, bool) {
	if i >= len(r.Sent) {
		return "", false
	}
	return r.Sent[i], i < len(r.Draft) && r.Draft[i]
}

// finalize makes message id, which a stream opened for part i, show
// part: a native stream still open is ended with it; an edit is skipped
// when the message shows part already. A message that cannot be edited
// (deleted meanwhile, too old, the platform failing the edit) is replaced
// by a new one, so the user never keeps a cut-off answer: the stale one
// is deleted where the channel can.
func (g *Gateway) finalize(ctx context.Context, ch core.Channel, to core.Outbound, id, part string, i int, sp *shownParts) (string, error) {
	if sp != nil {
		if d, ok := sp.open[i]; ok {
			if ns, ok := ch.(core.NativeStreamer); ok {
				return ns.EndDraft(ctx, to, d, part)
			}
		}
		if shown, ok := sp.shown[i]; ok && shown == part {
			return id, nil
		}
		if d := sp.notBefore.Sub(g.clock.Now()); d > 0 {
			if err := g.clock.Sleep(ctx, d); err != nil {
				return "", err
			}
			sp.notBefore = time.Time{}
		}
	}
	st, ok := ch.(core.Streamer)
	if !ok {
		return ch.Send(ctx, to, part)
	}
	err := st.Edit(ctx, to, id, part)
	if err == nil || ctx.Err() != nil {
		return id, err
	}
	g.log.Warn("a streamed message could not be edited to the final text; sending the part anew", "conv", to.Conversation.String(), "kind", core.ErrorKind(err).String(), "err", err)
	newID, err := ch.Send(ctx, to, part)
	if err != nil {
		return "", err
	}
	if d, ok := ch.(core.Deleter); ok {
		if err := d.Delete(ctx, to, id); err != nil {
			g.log.Debug("the cut-off streamed message stays", "conv", to.Conversation.String(), "err", err)
		}
	}
	return newID, nil
}
