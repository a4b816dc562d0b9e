package telegram

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/core"
)

// An album (photos or files a user sends together, with one caption)
// reaches a bot as one update per item, sharing a media_group_id. The
// user sent one message, and expects one answer about all of it: the
// poller waits a moment when a batch ends inside an album, reads again
// from the same offset (which confirms nothing to Telegram), and hands
// each album to the gateway as one message.

// albumWait is how long the poller waits for an album's other items when
// a batch ends with one of them; albumRereads bounds the waits of one
// batch (each is taken only while new items keep coming).
const (
	albumWait    = 600 * time.Millisecond
	albumRereads = 3
)

// albumOpen says the batch ends with an album's item: more of the album
// may be on its way.
func albumOpen(updates []models.Update) bool {
	if len(updates) == 0 {
		return false
	}
	m := updates[len(updates)-1].Message
	return m != nil && m.MediaGroupID != ""
}

// waitForAlbum reads the batch again, from the same offset, after
// albumWait while it ends inside an album and new updates came. It
// returns the longest batch read (updates on any error).
func (b *Bot) waitForAlbum(ctx context.Context, offset int64, updates []models.Update) ([]models.Update, error) {
	for range albumRereads {
		if !albumOpen(updates) {
			break
		}
		if err := b.sleep(ctx, albumWait); err != nil {
			return updates, err
		}
		more, err := b.getUpdatesWithin(ctx, offset, 0)
		if err != nil {
			b.log.Debug("reading an album's other items failed; handing over what came", "err", err)
			break
		}
		if len(more) <= len(updates) || more[0].ID != updates[0].ID {
			break
		}
		updates = more
	}
	return updates, nil
}

// albumItems is how many of the updates from the first, all of one chat
// (the indexes us into updates), are items of the first one's album: 0
// when it is no album's item.
func albumItems(updates []models.Update, us []int) int {
	first := updates[us[0]].Message
	if first == nil || first.MediaGroupID == "" {
		return 0
	}
	n := 1
	for n < len(us) {
		m := updates[us[n]].Message
		if m == nil || m.MediaGroupID != first.MediaGroupID {
			break
		}
		n++
	}
	return n
}

// acceptAlbum hands an album's items to sink as one message: the first
// item's id (the key the queue drops a re-read by), the captions, every
// item's files in order. In a group, the album is for the bot when one of
// its items addresses it (the caption names the bot).
func (b *Bot) acceptAlbum(ctx context.Context, sink core.Sink, msgs []*models.Message) error {
	var in core.Inbound
	found := false
	var texts []string
	var fs []core.InboundFile
	for _, m := range msgs {
		fs = append(fs, files(m)...)
		one, ok := b.inbound(m)
		if !ok {
			continue
		}
		if !found {
			in, found = one, true
		}
		if t := strings.TrimSpace(one.Text); t != "" && !slices.Contains(texts, t) {
			texts = append(texts, t)
		}
	}
	if !found {
		return nil
	}
	in.MessageID = platformID(msgs[0].Chat.ID, msgs[0].ID)
	in.Text = strings.Join(texts, "\n")
	in.Files = fs
	return sink.Accept(ctx, in)
}
