package telegram

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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
//
// A batch that ends with a message near Telegram's length limit (the
// first part of a paste the client split, paste.go) is read again the
// same way, up to pasteRereads times.
func (b *Bot) waitForAlbum(ctx context.Context, offset int64, updates []models.Update) ([]models.Update, error) {
	for i := 0; ; i++ {
		if !(albumOpen(updates) && i < albumRereads) && !(pasteOpen(updates) && i < pasteRereads) {
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
// its items addresses it (the caption names the bot). What it replies to
// is quoted for the LLM, as for one message (withReplyContext).
func (b *Bot) acceptAlbum(ctx context.Context, sink core.Sink, msgs []*models.Message) error {
	var in core.Inbound
	var src *models.Message // the item in came from: its reply is the album's
	found := false
	var texts []string
	var fs []core.InboundFile
	for _, m := range msgs {
		fs = append(fs, files(m)...)
		one, ok := b.inbound(m, sink)
		if !ok {
			continue
		}
		if !found {
			in, src, found = one, m, true
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
	in = withForward(src, b.withReplyContext(ctx, sink, src, in))
	return sink.Accept(ctx, in)
}

// albumMax is the most items Telegram puts in one album.
const albumMax = 10

// webhookAlbums gathers an album's items in webhook mode, where Telegram
// posts each in its own request (in parallel, up to the webhook's
// max_connections, 40 by default). The requests of one album wait, their
// platform unacknowledged, until no item came for albumWait (at most
// albumRereads waits after the first, or albumMax items); then the album
// is handed to the gateway as one message, and each request answers as
// that did: 200 once committed, 500 (Telegram delivers it again) if not.
// Items that reach different replicas are answered apart.
//
// An item Telegram delivers again after its album was committed (its
// request ended before the answer reached Telegram) is acknowledged
// without a second message: the album's items are remembered for
// albumKept. An item of the album that came after it was handed over is
// a message of its own.
type webhookAlbums struct {
	mu        sync.Mutex
	open      map[albumKey]*pendingAlbum
	committed map[albumKey]committedAlbum
	// kept is the committed albums in the order they were remembered
	// (a key again each time it was), so forgetting the oldest does not
	// scan them all.
	kept []keptAlbum
	// handing counts the open albums and those being handed over, for
	// stop to wait for.
	handing sync.WaitGroup
}

// albumKept is how long the items of a committed album are remembered,
// and albumsKept how many albums at most: the bound holds however many
// albums come in albumKept.
const (
	albumKept  = 10 * time.Minute
	albumsKept = 10000
)

type committedAlbum struct {
	ids []int
	at  time.Time
}

type keptAlbum struct {
	k  albumKey
	at time.Time
}

type albumKey struct {
	chat  int64
	group string
}

// pendingAlbum is one album being gathered; done closes when it was
// handed over, with err its outcome.
type pendingAlbum struct {
	updates  []*models.Update
	timer    *time.Timer
	deadline time.Time
	done     chan struct{}
	err      error
}

// join adds u, an album's item, to the album being gathered and returns
// the album's outcome once accept took it, or ctx's error when the
// request ends first (Telegram then delivers u again).
func (a *webhookAlbums) join(ctx context.Context, u *models.Update, accept func([]*models.Update) error) error {
	_, err := a.gather(ctx, albumKey{u.Message.Chat.ID, u.Message.MediaGroupID}, u, true, nil, albumRereads, accept)
	return err
}

// gather adds u to the items gathered under k, as join. With opens
// false, u joins only items already being gathered, and only when fits
// says it continues them (fits nil: always); joined is false when it did
// not (nothing was done with u). rereads bounds the waits for more.
func (a *webhookAlbums) gather(ctx context.Context, k albumKey, u *models.Update, opens bool, fits func(pending []*models.Update) bool, rereads int, accept func([]*models.Update) error) (joined bool, err error) {
	a.mu.Lock()
	if a.open == nil {
		a.open, a.committed = map[albumKey]*pendingAlbum{}, map[albumKey]committedAlbum{}
	}
	if c, ok := a.committed[k]; ok && slices.Contains(c.ids, u.Message.ID) {
		a.mu.Unlock()
		return true, nil // delivered again: it is in the committed album
	}
	p := a.open[k]
	again := p != nil && slices.ContainsFunc(p.updates, func(v *models.Update) bool { return v.Message.ID == u.Message.ID })
	// An item delivered again while its items are gathered waits for
	// their outcome, whatever came after it: handed over on its own, it
	// would be committed under the id they are then dropped by.
	if p == nil && !opens || p != nil && !again && fits != nil && !fits(p.updates) {
		a.mu.Unlock()
		return false, nil
	}
	if p == nil {
		p = &pendingAlbum{done: make(chan struct{}), deadline: time.Now().Add(time.Duration(rereads) * albumWait)}
		a.open[k] = p
		a.handing.Add(1)
		p.timer = time.AfterFunc(albumWait, func() { a.hand(k, p, accept) })
	} else if time.Now().Before(p.deadline) {
		p.timer.Reset(albumWait)
	}
	if !again {
		p.updates = append(p.updates, u) // not an item delivered again while gathering
	}
	full := len(p.updates) >= albumMax
	a.mu.Unlock()
	if full {
		go a.hand(k, p, accept)
	}
	select {
	case <-p.done:
		return true, p.err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// hand gives p's items, in the order the user sent them, to accept, once.
func (a *webhookAlbums) hand(k albumKey, p *pendingAlbum, accept func([]*models.Update) error) {
	a.mu.Lock()
	if a.open[k] != p {
		a.mu.Unlock()
		return // handed over already
	}
	delete(a.open, k)
	p.timer.Stop()
	us := p.updates
	a.mu.Unlock()
	defer a.handing.Done()
	slices.SortFunc(us, func(x, y *models.Update) int { return x.Message.ID - y.Message.ID })
	p.err = accept(us)
	if p.err == nil {
		a.remember(k, us)
	}
	close(p.done)
}

// stop ends the gathering when the webhook stops serving: the albums
// still open are not handed over (their requests ended; Telegram delivers
// them again) and fail with err, and stop returns once no album is being
// handed over, so nothing reaches the gateway after the channel stopped.
func (a *webhookAlbums) stop(err error) {
	a.mu.Lock()
	for k, p := range a.open {
		delete(a.open, k)
		p.timer.Stop()
		p.err = err
		close(p.done)
		a.handing.Done()
	}
	a.mu.Unlock()
	a.handing.Wait()
}

// remember keeps the ids of a committed album's items for albumKept, and
// forgets the albums kept longer.
func (a *webhookAlbums) remember(k albumKey, us []*models.Update) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.kept) > 0 && (now.Sub(a.kept[0].at) > albumKept || len(a.kept) >= albumsKept) {
		old := a.kept[0]
		a.kept = a.kept[1:]
		if c, ok := a.committed[old.k]; ok && c.at.Equal(old.at) {
			delete(a.committed, old.k) // not remembered again since
		}
	}
	c := a.committed[k] // a straggler's own message adds to it
	c.at = now
	for _, u := range us {
		c.ids = append(c.ids, u.Message.ID)
	}
	if n := len(c.ids); n > 2*albumMax {
		c.ids = slices.Clone(c.ids[n-2*albumMax:]) // an album has at most albumMax
	}
	a.committed[k] = c
	a.kept = append(a.kept, keptAlbum{k, now})
}

// acceptWebhookAlbum is what webhookAlbums hands an album to: the one
// item that came is an update like any other.
func (b *Bot) acceptWebhookAlbum(ctx context.Context, sink core.Sink, us []*models.Update) error {
	if len(us) == 1 {
		return b.handle(ctx, sink, us[0])
	}
	msgs := make([]*models.Message, len(us))
	for i, u := range us {
		b.health.Event()
		msgs[i] = u.Message
	}
	if err := b.acceptAlbum(ctx, sink, msgs); err != nil {
		return fmt.Errorf("update %d (album of %d): %w", us[0].ID, len(us), err)
	}
	return nil
}
