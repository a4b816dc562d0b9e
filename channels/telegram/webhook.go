package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// secretHeader is where Telegram puts the webhook's secret_token.
const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxUpdateBytes bounds a webhook body: an update is a few KiB.
const maxUpdateBytes = 1 << 20

// runWebhook registers the webhook with Telegram and serves it on
// webhook.listen until ctx ends. An update is answered 200 only after the
// gateway committed it; on failure Telegram delivers it again.
func (b *Bot) runWebhook(ctx context.Context, sink core.Sink) error {
	wh := b.cfg.Webhook
	if wh.URL == "" || wh.Listen == "" || !wh.Secret.IsSet() {
		return core.Errorf(core.KindInvalid, "channels.telegram.mode is webhook but channels.telegram.webhook.url, .listen or .secret is empty; set all three (or use mode: polling)")
	}
	// The registration under the lease ends with this Run.
	var registering sync.WaitGroup
	defer registering.Wait()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	// Albums still gathering when the server stopped are not handed to
	// the gateway after Run returned: their requests ended unacknowledged.
	defer b.albums.stop(errors.New("the Telegram webhook stopped before the album was handed over; Telegram delivers its items again"))
	defer b.pastes.stop(errors.New("the Telegram webhook stopped before a split paste was handed over; Telegram delivers its parts again"))
	// Updates are small; the limits keep idle or slow clients from holding
	// connections (and file descriptors) open.
	err := b.webhook.Serve(ctx, "channels.telegram.webhook.listen", wh.Listen, b.WebhookHandler(ctx, sink), toolkit.ServerLimits{Body: maxUpdateBytes},
		func(addr net.Addr) error {
			if b.o.Hold != nil {
				// Every replica serves the webhook; the holder of the
				// bot's lease registers it (again after a handover).
				b.health.Connected()
				b.log.Info("Telegram webhook served", "url", wh.URL, "listen", addr.String())
				registering.Add(1)
				go func() {
					defer registering.Done()
					_ = b.held(rctx, func(ctx context.Context, _ Lease) error {
						if err := b.setWebhook(ctx); err != nil {
							b.health.Failed(err)
							b.log.Error("registering the Telegram webhook failed; trying again", "err", err)
							return err
						}
						<-ctx.Done()
						return nil
					})
				}()
				return nil
			}
			if err := b.setWebhook(ctx); err != nil {
				return err
			}
			b.health.Connected()
			b.log.Info("Telegram webhook registered", "url", wh.URL, "listen", addr.String())
			return nil
		})
	if err != nil && core.ErrorKind(err) != core.KindInvalid {
		b.health.Failed(err)
	}
	return err
}

// setWebhook registers channels.telegram.webhook with Telegram.
func (b *Bot) setWebhook(ctx context.Context) error {
	wh := b.cfg.Webhook
	if _, err := b.api.SetWebhook(ctx, &tgbot.SetWebhookParams{URL: wh.URL, SecretToken: wh.Secret.Value(), AllowedUpdates: allowedUpdates}); err != nil {
		return fmt.Errorf("telegram setWebhook %s (channels.telegram.webhook.url): %w", wh.URL, b.classify("setWebhook", err))
	}
	return nil
}

// WebhookAddr waits until the webhook server listens and returns its
// address (useful with listen: "127.0.0.1:0").
func (b *Bot) WebhookAddr(ctx context.Context) (net.Addr, error) { return b.webhook.Addr(ctx) }

// WebhookHandler is the HTTP handler for Telegram's webhook POSTs: 401
// without the right secret token, 400 for an unreadable body, 500 when
// the gateway could not commit the update (Telegram retries), else 200.
// An album's item waits for the album's other items (webhookAlbums), a
// message near Telegram's length limit for the rest of the paste the
// client split it from (joinWebhookPaste).
func (b *Bot) WebhookHandler(ctx context.Context, sink core.Sink) http.Handler {
	secret := []byte(b.cfg.Webhook.Secret.Value())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		got := []byte(r.Header.Get(secretHeader))
		if len(secret) == 0 || subtle.ConstantTimeCompare(got, secret) != 1 {
			b.log.Warn("webhook request with a wrong or missing secret token dropped", "remote", r.RemoteAddr)
			http.Error(w, "wrong or missing "+secretHeader, http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUpdateBytes))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		var u models.Update
		if err := json.Unmarshal(body, &u); err != nil {
			b.log.Warn("webhook body is not an update; dropped", "err", err)
			http.Error(w, "not a Telegram update", http.StatusBadRequest)
			return
		}
		hctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		handle := b.handle
		if m := u.Message; m != nil && m.MediaGroupID != "" {
			handle = func(hctx context.Context, sink core.Sink, u *models.Update) error {
				return b.albums.join(hctx, u, func(us []*models.Update) error { return b.acceptWebhookAlbum(ctx, sink, us) })
			}
		} else if pastePart(m) {
			handle = func(hctx context.Context, sink core.Sink, u *models.Update) error {
				return b.joinWebhookPaste(ctx, hctx, sink, u)
			}
		}
		if err := handle(hctx, sink, &u); err != nil {
			b.log.Warn("webhook update not accepted; Telegram will deliver it again", "update_id", u.ID, "err", err)
			http.Error(w, "not committed, retry", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
