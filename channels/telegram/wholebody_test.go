package telegram

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// received is what a test server saw of one request.
type received struct {
	length   int64
	chunked  bool
	body     []byte
	text     string // the form's text field, when it has one
	document []byte // the form's document file, when it has one
}

func recordingServer(t *testing.T) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		one := received{length: r.ContentLength, chunked: len(r.TransferEncoding) > 0}
		var err error
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
			err = r.ParseMultipartForm(1 << 20)
			if err == nil {
				one.text = r.FormValue("text")
				if f, _, ferr := r.FormFile("document"); ferr == nil {
					one.document, _ = io.ReadAll(f)
					f.Close()
				}
			}
		} else {
			one.body, err = io.ReadAll(r.Body)
		}
		if err != nil {
			t.Errorf("server: read the request: %v", err)
		}
		mu.Lock()
		got = append(got, one)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"result":{"message_id":7,"date":1,"chat":{"id":42,"type":"private"}}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// TestWholeBodiesSendsTheLibrarysFormsWithALength drives the Bot API
// library through wholeBodies: a message's form arrives with a
// Content-Length (not chunked), a file too big to hold arrives whole,
// streamed.
func TestWholeBodiesSendsTheLibrarysFormsWithALength(t *testing.T) {
	srv, got := recordingServer(t)
	api, err := tgbot.New("42:token",
		tgbot.WithServerURL(srv.URL),
		tgbot.WithSkipGetMe(),
		tgbot.WithHTTPClient(5*time.Second, wholeBodies{srv.Client()}),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := api.SendMessage(ctx, &tgbot.SendMessageParams{ChatID: 42, Text: "hello there"}); err != nil {
		t.Fatalf("sendMessage: %v", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), wholeBodyMax/16+100)
	if _, err := api.SendDocument(ctx, &tgbot.SendDocumentParams{ChatID: 42, Document: &models.InputFileUpload{Filename: "big.txt", Data: bytes.NewReader(big)}}); err != nil {
		t.Fatalf("sendDocument: %v", err)
	}
	r := got()
	if len(r) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(r))
	}
	if r[0].chunked || r[0].length <= 0 || r[0].text != "hello there" {
		t.Errorf("sendMessage arrived chunked=%v length=%d text=%q; want a Content-Length and the text", r[0].chunked, r[0].length, r[0].text)
	}
	if !r[1].chunked || !bytes.Equal(r[1].document, big) {
		t.Errorf("sendDocument of %d bytes arrived chunked=%v with %d bytes; want it streamed whole", len(big), r[1].chunked, len(r[1].document))
	}
}

// TestWholeBodies covers the client on its own: the size boundary, a
// body that fails while it is read, and a body whose length is known.
func TestWholeBodies(t *testing.T) {
	srv, got := recordingServer(t)
	failed := errors.New("form broke")
	tests := []struct {
		name    string
		body    func() io.Reader // nil: no body
		known   bool             // a bytes.Reader (net/http knows its length)
		wantErr error
		chunked bool
		size    int
	}{
		{name: "empty", body: func() io.Reader { return strings.NewReader("") }, size: 0},
		{name: "small", body: func() io.Reader { return strings.NewReader("a=1") }, size: 3},
		{name: "exactly the most it holds", body: func() io.Reader { return bytes.NewReader(make([]byte, wholeBodyMax)) }, size: wholeBodyMax},
		{name: "one byte more", body: func() io.Reader { return bytes.NewReader(make([]byte, wholeBodyMax+1)) }, chunked: true, size: wholeBodyMax + 1},
		{name: "length known", body: func() io.Reader { return bytes.NewReader([]byte("abc")) }, known: true, size: 3},
		{name: "fails while read", body: func() io.Reader { return io.MultiReader(strings.NewReader("part"), errReader{failed}) }, wantErr: failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(got())
			var req *http.Request
			var err error
			if tt.known {
				req, err = http.NewRequest(http.MethodPost, srv.URL, tt.body())
			} else {
				pr, pw := io.Pipe()
				go func() {
					_, err := io.Copy(pw, tt.body())
					pw.CloseWithError(err)
				}()
				req, err = http.NewRequest(http.MethodPost, srv.URL, pr)
			}
			if err != nil {
				t.Fatal(err)
			}
			resp, err := wholeBodies{srv.Client()}.Do(req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Do: %v, want %v", err, tt.wantErr)
				}
				if n := len(got()) - before; n != 0 {
					t.Errorf("the server saw %d requests of a body that failed", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			resp.Body.Close()
			r := got()
			if len(r) != before+1 {
				t.Fatalf("server saw %d new requests, want 1", len(r)-before)
			}
			one := r[len(r)-1]
			if one.chunked != tt.chunked || len(one.body) != tt.size {
				t.Errorf("arrived chunked=%v with %d bytes, want chunked=%v with %d", one.chunked, len(one.body), tt.chunked, tt.size)
			}
			if !tt.chunked && one.length != int64(tt.size) {
				t.Errorf("Content-Length %d, want %d", one.length, tt.size)
			}
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
