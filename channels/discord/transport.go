package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// discordHost is the host discordgo sends REST and gateway discovery to.
const discordHost = "discord.com"

// apiVersionSuffix matches the "/api" or "/api/v10" an older api_url ends
// with; discordgo puts its own /api/v9 in every path.
var apiVersionSuffix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/api(/v[0-9]+)?$`) })

// apiRoot parses channels.discord.api_url into the root that replaces
// https://discord.com: scheme, host and an optional path prefix.
func apiRoot(raw string) (*url.URL, error) {
	s := strings.TrimRight(strings.TrimSpace(raw), "/")
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, core.Errorf(core.KindInvalid, "channels.discord.api_url %q is not an http(s) URL; use the root Discord is reached at, e.g. https://discord.com", core.RedactURL(raw))
	}
	u.Path = apiVersionSuffix().ReplaceAllString(strings.TrimRight(u.Path, "/"), "")
	u.RawPath = ""
	return u, nil
}

// rewrite is the per-session HTTP transport: requests discordgo sends to
// https://discord.com go to the api_url root instead, path kept. Other
// hosts pass unchanged. Gateway discovery is answered by the api_url
// server; an answer naming Discord's own gateway (wss://gateway.discord.gg)
// is taken to mean the api_url host, so the websocket goes there too (ws
// for an http api_url, wss for https).
type rewrite struct {
	root *url.URL
	next http.RoundTripper
}

// isDefault reports an api_url of Discord itself: nothing to rewrite.
func (t rewrite) isDefault() bool {
	return t.root.Host == discordHost && t.root.Scheme == "https" && t.root.Path == ""
}

func (t rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != discordHost || t.isDefault() {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host = t.root.Scheme, t.root.Host
	r.URL.Path = t.root.Path + req.URL.Path
	if req.URL.RawPath != "" {
		r.URL.RawPath = t.root.Path + req.URL.RawPath
	}
	r.Host = ""
	resp, err := t.next.RoundTrip(r)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK ||
		!(strings.HasSuffix(req.URL.Path, "/gateway") || strings.HasSuffix(req.URL.Path, "/gateway/bot")) {
		return resp, err
	}
	return t.gatewayAnswer(resp)
}

// gatewayAnswer points a discovery answer naming Discord's own gateway
// at the api_url host.
func (t rewrite) gatewayAnswer(resp *http.Response) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var d map[string]any
	if json.Unmarshal(body, &d) == nil {
		if raw, _ := d["url"].(string); raw != "" {
			if u := t.gatewayURL(raw); u != raw {
				d["url"] = u
				if b, err := json.Marshal(d); err == nil {
					body = b
				}
			}
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return resp, nil
}

// gatewayURL points a websocket URL naming Discord's own gateway (a
// discovery answer, READY's resume_gateway_url) at the api_url host;
// other URLs are returned as they are.
func (t rewrite) gatewayURL(raw string) string {
	if t.isDefault() {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || !(u.Host == "discord.gg" || strings.HasSuffix(u.Host, ".discord.gg")) {
		return raw
	}
	u.Scheme = "ws"
	if t.root.Scheme == "https" {
		u.Scheme = "wss"
	}
	u.Host, u.Path = t.root.Host, t.root.Path+u.Path
	return u.String()
}

// gatewayURL is rewrite.gatewayURL for this bot's api_url.
func (b *Bot) gatewayURL(raw string) string {
	if raw == "" {
		return ""
	}
	return rewrite{root: b.root}.gatewayURL(raw)
}

// newHTTPClient returns the client of one channel: its own transport (a
// clone of the default one, so connection pools are not shared with the
// rest of the process) behind the rewrite.
func newHTTPClient(root *url.URL, base *http.Client) *http.Client {
	c := &http.Client{Timeout: 20 * time.Second}
	if base != nil {
		cp := *base
		c = &cp
	}
	next := c.Transport
	if next == nil {
		next = toolkit.NewTransport()
	}
	c.Transport = rewrite{root: root, next: next}
	return c
}

// errDialerClosed is returned by a connTracker dial after shutdown.
var errDialerClosed = errors.New("discord gateway dialer closed")

// connTracker is the websocket dialer's network side for one gateway
// session: it keeps the connection it dialed so the channel can tell
// whether it is still open and drop it (a zombie connection, a handshake
// that hangs, shutdown) without reaching into the library.
type connTracker struct {
	mu     sync.Mutex
	conn   *trackedConn // nil when none is open
	cancel context.CancelFunc
	closed bool
}

// trackedConn tells its tracker when it is closed.
type trackedConn struct {
	net.Conn
	t *connTracker
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	if c.t.conn == c {
		c.t.conn = nil
	}
	c.t.mu.Unlock()
	return c.Conn.Close()
}

func (c *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errDialerClosed
	}
	dctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.mu.Unlock()
	d := net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(dctx, network, addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	cancel()
	c.cancel = nil
	if err != nil {
		return nil, err
	}
	if c.closed {
		conn.Close()
		return nil, errDialerClosed
	}
	c.conn = &trackedConn{Conn: conn, t: c}
	return c.conn, nil
}

// open reports whether the last connection dialed is still open.
func (c *connTracker) open() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil
}

// drop closes the current connection (the library sees a read error and
// reports the connection lost) and cancels a dial in progress.
func (c *connTracker) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	if c.conn != nil {
		c.conn.Conn.Close()
		c.conn = nil
	}
}

// shutdown drops the connection and refuses later dials.
func (c *connTracker) shutdown() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.drop()
}
