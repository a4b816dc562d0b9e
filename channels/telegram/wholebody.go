package telegram

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
)

// wholeBodyMax is the largest request form wholeBodies reads before
// sending; a bigger one (a file upload) is streamed as the library
// writes it.
const wholeBodyMax = 64 << 10

// doer is the one method of an HTTP client the Bot API library calls.
type doer interface {
	Do(*http.Request) (*http.Response, error)
}

// wholeBodies is the HTTP client the Bot API library is given. The
// library writes every request's multipart form into an io.Pipe from a
// goroutine, so net/http sends the body chunked and flushes each chunk:
// a sendMessage left the process as 11 writes, each its own TCP segment
// (and, over TLS, its own record). wholeBodies reads a form of up to
// wholeBodyMax bytes first, so the request goes out with a
// Content-Length in one write, and the transport can send it again on a
// fresh connection when a kept-alive one turns out closed.
type wholeBodies struct {
	client doer
}

// Do implements the library's HttpClient.
func (w wholeBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength != 0 || req.GetBody != nil {
		return w.client.Do(req) // a length is known already
	}
	head, rest, err := readUpTo(req.Body, wholeBodyMax)
	if err != nil {
		req.Body.Close()
		return nil, err
	}
	if rest {
		// Too big to hold: what was read goes first, the rest streams.
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), req.Body), req.Body}
		return w.client.Do(req)
	}
	req.Body.Close()
	req.ContentLength = int64(len(head))
	req.GetBody = func() (io.ReadCloser, error) {
		if len(head) == 0 {
			return http.NoBody, nil // net/http reads a zero length with a body as unknown
		}
		return io.NopCloser(bytes.NewReader(head)), nil
	}
	req.Body, _ = req.GetBody()
	return w.client.Do(req)
}

// readUpTo reads r to its end or until max bytes are read; more reports
// that r holds bytes past them.
func readUpTo(r io.Reader, max int) (head []byte, more bool, err error) {
	head = make([]byte, 0, 2048)
	for {
		if len(head) >= max {
			var one [1]byte
			n, err := io.ReadFull(r, one[:])
			if n == 1 {
				return append(head, one[0]), true, nil
			}
			if errors.Is(err, io.EOF) {
				return head, false, nil
			}
			return nil, false, err
		}
		if len(head) == cap(head) {
			head = slices.Grow(head, len(head))
		}
		n, err := r.Read(head[len(head):min(cap(head), max)])
		head = head[:len(head)+n]
		if errors.Is(err, io.EOF) {
			return head, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}
