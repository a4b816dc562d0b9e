package toolkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Download is one file to fetch from a platform's file host.
type Download struct {
	// Client makes the request (a copy is used, with its own redirect
	// policy).
	Client *http.Client
	URL    string
	// Hosts are the hosts ("host" or "host:port") the file may come from:
	// the platform's own file hosts. A URL or a redirect elsewhere is
	// refused, so a credential in Header never leaves them.
	Hosts []string
	// Header is sent with the request (a bot token the host asks for).
	Header http.Header
	// Check, when set, judges a 2xx answer before its body is read: a
	// platform that answers with a page instead of the file (Slack's
	// sign-in page) is an error, not the file's content.
	Check func(*http.Response) error
}

// Fetch downloads d into w: at most limit bytes, more is core.ErrTooLarge
// (a declared Content-Length over it is refused before reading). It
// fails on a non-2xx answer.
func Fetch(ctx context.Context, d Download, w io.Writer, limit int64) error {
	u, err := url.Parse(d.URL)
	if err != nil {
		return fmt.Errorf("file URL: %w", err)
	}
	if !allowedHost(u, d.Hosts) {
		return core.Errorf(core.KindInvalid, "refusing to download a file from %s: it is not the platform's file host", u.Host)
	}
	hc := http.Client{}
	if d.Client != nil {
		hc = *d.Client
	}
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !allowedHost(req.URL, d.Hosts) {
			return core.Errorf(core.KindInvalid, "refusing to follow a redirect of a file download to %s: it is not the platform's file host", req.URL.Host)
		}
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for k, v := range d.Header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			return ce
		}
		return &core.Error{Kind: core.KindUnavailable, Msg: "file download failed", Err: stripURL(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		kind := core.KindUnavailable
		if resp.StatusCode/100 == 4 {
			kind = core.KindBadRequest
		}
		return &core.Error{Kind: kind, Msg: fmt.Sprintf("file download: HTTP %d", resp.StatusCode)}
	}
	if d.Check != nil {
		if err := d.Check(resp); err != nil {
			return err
		}
	}
	if resp.ContentLength > limit {
		return core.ErrTooLarge
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("file download: %w", stripURL(err))
	}
	if n > limit {
		return core.ErrTooLarge
	}
	return nil
}

// allowedHost says whether u is on one of hosts (the port must match
// when a host names one).
func allowedHost(u *url.URL, hosts []string) bool {
	if u.Scheme != "https" && u.Scheme != "http" {
		return false
	}
	for _, h := range hosts {
		if strings.Contains(h, ":") {
			if strings.EqualFold(u.Host, h) {
				return true
			}
		} else if strings.EqualFold(u.Hostname(), h) && (u.Port() == "" || u.Scheme == "http" && u.Port() == "80" || u.Scheme == "https" && u.Port() == "443") {
			return true
		}
	}
	return false
}

// stripURL drops the URL from a transport error: a file URL may carry a
// token (Telegram's does).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// HostOf returns the host[:port] of a base URL ("" when it has none).
func HostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Host
}
