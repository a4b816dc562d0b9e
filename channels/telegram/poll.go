package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/core"
)

// The library's own poller stores the update offset before a handler has
// run, so a crash after it could lose an update. The channel drives
// getUpdates itself: the offset sent to Telegram (which confirms every
// update below it) only moves past an update once the gateway committed it.

// errConflict marks a 409 from getUpdates.
var errConflict = errors.New("409 conflict")

// apiError is a Bot API error answer.
type apiError struct {
	Code        int
	Description string
	RetryAfter  int
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s", e.Code, e.Description)
}

func (e *apiError) Is(target error) bool {
	return target == errConflict && e.Code == http.StatusConflict
}

// minEmptyPoll is the least time between two getUpdates that brought
// nothing: a server that answers at once instead of holding the long poll
// (a proxy, a self-hosted Bot API server, a poll timeout under a second)
// made the loop ask about 2,600 times a second.
const minEmptyPoll = time.Second

// offsetEvery is the least time between two writes of the offset to the
// lease: under a steady stream of messages one write a second, not one
// per getUpdates batch (each a durable commit of the shared database
// before the next poll).
const offsetEvery = time.Second

// poll long-polls getUpdates until ctx ends. Under a lease (l not nil)
// it starts from the offset the last holder left in the lease's data and
// keeps the offset there: after a batch when offsetEvery has passed since
// the last write, and when the polling ends. A takeover gets again the
// updates Telegram was not told of (Telegram itself forgets only the
// updates a getUpdates confirmed, so an older offset loses nothing: after
// a crash the one kept may be a few batches behind, up to a long poll
// old when the stream paused), and the queue's dedupe drops those
// already committed. A write of the offset the lease refuses (another
// replica took it over) ends the polling; so does the end of the lease's
// context. When identified is not nil, what a getUpdates brought waits
// for it to close (runPolling).
func (b *Bot) poll(ctx context.Context, sink core.Sink, l Lease, identified <-chan struct{}) error {
	var offset, kept int64
	var keptAt time.Time
	if l != nil {
		data, err := l.Data(ctx)
		if err != nil {
			return fmt.Errorf("telegram: read the last offset from the lease: %w", err)
		}
		if len(data) > 0 {
			if offset, err = strconv.ParseInt(string(data), 10, 64); err != nil {
				b.log.Warn("the lease's offset is unreadable; starting from Telegram's", "err", err)
				offset = 0
			}
			b.log.Info("resuming Telegram polling at the offset the last holder kept", "offset", offset)
		}
		kept = offset
		defer func() {
			// The last offset, for the next holder (a handover).
			if offset == kept {
				return
			}
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.SetData(wctx, []byte(strconv.FormatInt(offset, 10))); err != nil {
				b.log.Debug("could not keep the last offset in the lease; the next holder reads again what Telegram was not told of", "offset", offset, "err", err)
			}
		}()
	}
	backoff := time.Duration(0)
	conflicts := 0
	var lastConflictLog time.Time
	for ctx.Err() == nil {
		if backoff > 0 {
			if err := b.sleep(ctx, backoff); err != nil {
				return nil
			}
		}
		asked := b.now()
		updates, err := b.getUpdates(ctx, offset)
		if identified != nil {
			select {
			case <-identified:
				identified = nil
			case <-ctx.Done():
				return nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			b.health.Failed(err)
			var ae *apiError
			switch {
			case errors.Is(err, errConflict):
				conflicts++
				// Reported loudly at first and then once a minute, never
				// retried in silence; Healthy turns red after a minute.
				if conflicts == 1 || b.now().Sub(lastConflictLog) >= time.Minute {
					lastConflictLog = b.now()
					b.log.Error("Telegram refused getUpdates with 409 Conflict: another process is polling with this bot token, or a webhook is set for it. Stop the other instance (or delete the webhook, or set channels.telegram.mode: webhook); retrying",
						"telegram_says", err.Error(), "attempts", conflicts)
				}
				backoff = min(max(2*backoff, 2*time.Second), 30*time.Second)
			case errors.As(err, &ae) && ae.Code == http.StatusUnauthorized:
				// The token worked at start (getMe): it was revoked since.
				// Other channels keep answering; /readyz reports this one.
				b.health.Down(fmt.Errorf("telegram refused the bot token (getUpdates: %s): replace channels.telegram.token (from @BotFather) and restart", ae.Description))
				b.log.Error("Telegram refused the bot token while polling: it was revoked or replaced; set the new one in channels.telegram.token and restart. Retrying every 30s", "telegram_says", ae.Description)
				backoff = 30 * time.Second
				continue
			case errors.As(err, &ae) && ae.RetryAfter > 0:
				backoff = time.Duration(ae.RetryAfter) * time.Second
				b.log.Warn("getUpdates rate limited", "retry_after", backoff)
			default:
				backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
				b.log.Warn("getUpdates failed; retrying", "in", backoff, "err", err)
			}
			continue
		}
		if conflicts > 0 {
			b.log.Info("getUpdates works again after a conflict", "attempts", conflicts)
		}
		conflicts, backoff = 0, 0
		if len(updates) == 0 {
			backoff = minEmptyPoll - b.now().Sub(asked)
		}
		b.health.Connected()
		if k := pasteHeld(updates); k > 0 && k < len(updates) && !albumOpen(updates) {
			// Only the paste that ends the batch waits for its next
			// part: what came before it is handed over now.
			if next, err := b.handleBatch(ctx, sink, updates[:k], offset); err == nil {
				offset, updates = next, updates[k:]
			} // else the whole batch is handed over below, as always
		}
		if updates, err = b.waitForAlbum(ctx, offset, updates); err != nil {
			return nil // only the end of ctx ends the wait
		}
		next, err := b.handleBatch(ctx, sink, updates, offset)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Not committed: keep the offset so the update is read
			// again, and slow down a little.
			b.log.Warn("update not accepted; it will be read again", "update_id", next, "err", err)
			backoff = time.Second
		}
		offset = next
		if l != nil && offset != kept && b.now().Sub(keptAt) >= offsetEvery {
			if err := l.SetData(ctx, []byte(strconv.FormatInt(offset, 10))); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				kept = offset // not written again on the way out
				return fmt.Errorf("telegram: keep the offset in the lease: %w", err)
			}
			kept, keptAt = offset, b.now()
		}
	}
	return nil
}

// handleBatch hands one getUpdates batch to the sink and returns the
// offset to confirm: past every update when all were committed, else the
// first that was not (with its error). The chats of a batch are handed
// over side by side — their enqueues then share the store's flushes
// (group commit) instead of one fsync each after the other —, the
// updates of one chat one after the other, in order, stopping at the
// first failure. An update read again after a failure that another chat's
// was committed past is a duplicate the queue drops.
func (b *Bot) handleBatch(ctx context.Context, sink core.Sink, updates []models.Update, offset int64) (int64, error) {
	var chats [][]int // each chat's updates, by their index in the batch
	index := map[int64]int{}
	for i := range updates {
		if updates[i].ID < offset {
			continue // already handled (Telegram repeats nothing below offset, but be safe)
		}
		c := updateChat(&updates[i])
		k, ok := index[c]
		if !ok {
			k = len(chats)
			index[c] = k
			chats = append(chats, nil)
		}
		chats[k] = append(chats[k], i)
	}
	failed := make([]error, len(updates))
	run := func(us []int) {
		for len(us) > 0 {
			i := us[0]
			if n := albumItems(updates, us); n > 1 {
				msgs := make([]*models.Message, n)
				for k, j := range us[:n] {
					b.health.Event()
					msgs[k] = updates[j].Message
				}
				if err := b.acceptAlbum(ctx, sink, msgs); err != nil {
					failed[i] = fmt.Errorf("update %d (album of %d): %w", updates[i].ID, n, err)
					return
				}
				us = us[n:]
				continue
			}
			if n := pasteParts(updates, us); n > 1 {
				parts := make([]*models.Update, n)
				for k, j := range us[:n] {
					parts[k] = &updates[j]
				}
				if err := b.acceptPaste(ctx, sink, parts); err != nil {
					failed[i] = err
					return
				}
				us = us[n:]
				continue
			}
			if err := b.handle(ctx, sink, &updates[i]); err != nil {
				failed[i] = err
				return
			}
			us = us[1:]
		}
	}
	if len(chats) == 1 {
		run(chats[0])
	} else {
		var wg sync.WaitGroup
		for _, us := range chats {
			wg.Go(func() { run(us) })
		}
		wg.Wait()
	}
	next := offset
	for i := range updates {
		u := &updates[i]
		if u.ID < offset {
			continue
		}
		if failed[i] != nil {
			return u.ID, failed[i]
		}
		next = u.ID + 1
	}
	return next, nil
}

// updateChat is the chat an update belongs to (0: none the bot keeps in
// order).
func updateChat(u *models.Update) int64 {
	switch {
	case u.Message != nil:
		return u.Message.Chat.ID
	case u.EditedMessage != nil:
		return u.EditedMessage.Chat.ID
	case u.MessageReaction != nil:
		return u.MessageReaction.Chat.ID
	}
	return 0
}

// getUpdates makes one long-poll request. Its parameters go as the
// library sends every other call: a multipart form, lists as JSON text.
func (b *Bot) getUpdates(ctx context.Context, offset int64) ([]models.Update, error) {
	return b.getUpdatesWithin(ctx, offset, int(b.o.PollTimeout/time.Second))
}

// getUpdatesWithin is getUpdates with a long poll of timeout seconds (0:
// what is there now).
func (b *Bot) getUpdatesWithin(ctx context.Context, offset int64, timeout int) ([]models.Update, error) {
	body, contentType, err := getUpdatesForm(offset, timeout)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.cfg.APIURL+"/bot"+b.token+"/getUpdates", body)
	if err != nil {
		return nil, b.scrub(fmt.Errorf("getUpdates: %w", err))
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, b.scrub(fmt.Errorf("getUpdates: %w", err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, b.scrub(fmt.Errorf("getUpdates: read answer: %w", err))
	}
	// Every update readable (all but never): one decode of the answer.
	// Otherwise the updates are read one by one below, so one the library
	// cannot decode does not block the ones after it.
	var whole struct {
		OK     bool            `json:"ok"`
		Result []models.Update `json:"result"`
	}
	if json.Unmarshal(raw, &whole) == nil && whole.OK {
		if whole.Result == nil {
			whole.Result = []models.Update{}
		}
		return whole.Result, nil
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d with an unreadable answer (is channels.telegram.api_url %s a Bot API server?): %w", resp.StatusCode, core.RedactURL(b.cfg.APIURL), err)
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, &apiError{Code: code, Description: r.Description, RetryAfter: r.Parameters.RetryAfter}
	}
	out := make([]models.Update, 0, len(r.Result))
	for _, one := range r.Result {
		var u models.Update
		if err := json.Unmarshal(one, &u); err != nil {
			// One unreadable update must not block the ones after it.
			var id struct {
				ID int64 `json:"update_id"`
			}
			_ = json.Unmarshal(one, &id)
			b.log.Warn("skipping an update the Telegram library cannot decode", "update_id", id.ID, "err", err)
			out = append(out, models.Update{ID: id.ID})
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// getUpdatesForm is the multipart body of a getUpdates request and its
// Content-Type.
func getUpdatesForm(offset int64, timeout int) (*bytes.Buffer, string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if offset != 0 {
		if err := w.WriteField("offset", strconv.FormatInt(offset, 10)); err != nil {
			return nil, "", err
		}
	}
	if err := w.WriteField("timeout", strconv.Itoa(timeout)); err != nil {
		return nil, "", err
	}
	kinds, err := json.Marshal(allowedUpdates)
	if err != nil {
		return nil, "", err
	}
	if err := w.WriteField("allowed_updates", string(kinds)); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return &body, w.FormDataContentType(), nil
}
