package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/opentalon/opentalon/core"
)

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the
// request body under the webhook's secret.
const SignatureHeader = "X-OpenTalon-Signature"

// EventHeader carries the event's kind.
const EventHeader = "X-OpenTalon-Event"

// Payload is the JSON body a webhook receives.
type Payload struct {
	Kind       string            `json:"kind"`
	Subject    string            `json:"subject"`
	Message    string            `json:"message"`
	At         time.Time         `json:"at"`
	Details    map[string]string `json:"details,omitempty"`
	Suppressed int               `json:"suppressed"`
}

// Sign is the signature header's value for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Webhook POSTs each notification as JSON (Payload) to URL, signed with
// Secret when set. A 2xx answer is success; a 4xx other than 408 and 429
// is permanent; anything else is retried.
type Webhook struct {
	URL    string
	Secret core.Secret
	Client *http.Client
}

// Name implements Sink: the URL's scheme and host only. Its path, query
// and user info may hold a token (Slack's and Discord's incoming webhooks
// carry theirs in the path).
func (w Webhook) Name() string {
	u, err := url.Parse(w.URL)
	if err != nil {
		return "webhook"
	}
	return "webhook " + safeURL(u)
}

// safeURL is u without what may hold a secret: the scheme and host, and
// "/…" for a path left out.
func safeURL(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" {
		s += "/…"
	}
	return s
}

// Send implements Sink.
func (w Webhook) Send(ctx context.Context, n Notification) error {
	body, err := json.Marshal(Payload{Kind: n.Kind, Subject: n.Subject, Message: n.Message, At: n.At.UTC(), Details: n.Details, Suppressed: n.Suppressed})
	if err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "opentalon")
	req.Header.Set(EventHeader, n.Kind)
	if w.Secret.IsSet() {
		req.Header.Set(SignatureHeader, Sign([]byte(w.Secret.Value()), body))
	}
	c := w.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", w.Name(), redactURL(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429:
		return Permanent(fmt.Errorf("%s answered %s", w.Name(), resp.Status))
	}
	return fmt.Errorf("%s answered %s", w.Name(), resp.Status)
}

// redactURL keeps a webhook URL's path, query and user info (which may
// hold a token) out of a transport error.
func redactURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		if u, perr := url.Parse(ue.URL); perr == nil {
			ue.URL = safeURL(u)
		}
	}
	return err
}

// Chat posts each notification as one message in a conversation of any
// channel (an operator's own DM).
type Chat struct {
	Conversation core.ConversationKey
	// Post sends text to the conversation (the channel's Format and Send).
	Post func(ctx context.Context, conv core.ConversationKey, text string) error
}

// Name implements Sink.
func (c Chat) Name() string { return "chat " + c.Conversation.String() }

// Send implements Sink.
func (c Chat) Send(ctx context.Context, n Notification) error {
	return c.Post(ctx, c.Conversation, n.Text())
}

// Func is a sink made of a function (a plugin's Notify).
type Func struct {
	Label string
	Fn    func(ctx context.Context, n Notification) error
}

// Name implements Sink.
func (f Func) Name() string { return f.Label }

// Send implements Sink.
func (f Func) Send(ctx context.Context, n Notification) error { return f.Fn(ctx, n) }
