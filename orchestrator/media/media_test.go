package media

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

type models struct{ vision bool }

func (m models) Can(c string) bool { return m.vision && c == "vision" }
func (models) Transcribe(context.Context, string, core.Attachment, core.ConversationKey, string) (string, error) {
	return "transcript", nil
}

func newReader(t *testing.T, o Options) *Reader {
	db, err := store.Open(context.Background(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	o.Store = db
	if o.Models == nil {
		o.Models = models{}
	}
	return New(o)
}

// serve is a FetchFunc handing out files by id, counting the fetches.
func serve(files map[string]string, fetches *int) core.FetchFunc {
	return func(_ context.Context, f core.InboundFile, w io.Writer, limit int64) error {
		*fetches++
		_, err := io.Copy(w, io.LimitReader(strings.NewReader(files[f.ID]), limit+1))
		return err
	}
}

func TestReaderDocuments(t *testing.T) {
	r := newReader(t, Options{DocumentTokens: 10, Extractor: testExtractor(t)})
	n := 0
	fetch := serve(map[string]string{
		"long":   strings.Repeat("word ", 100),
		"broken": "%PDF-1.4\nnot really a pdf",
		"code":   "package main\n",
	}, &n)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "read",
		Files: []core.InboundFile{{ID: "long", Kind: core.MediaDocument, Name: "long.txt", MIME: "text/plain"}}}
	mi, err := r.Read(context.Background(), in, fetch)
	if err != nil || mi.Reply != "" {
		t.Fatalf("Read = %+v, %v", mi, err)
	}
	if !strings.Contains(mi.Text, `Attached file "long.txt"`) || !strings.Contains(mi.Text, "media.document_tokens") || len(mi.Text) > 400 {
		t.Fatalf("text %q; want the document cut at 40 bytes with a note", mi.Text)
	}
	if _, err := r.Read(context.Background(), in, fetch); err != nil || n != 1 {
		t.Fatalf("a second read fetched again (%d fetches, %v); the media store keeps it", n, err)
	}

	in.Files = []core.InboundFile{{ID: "broken", Kind: core.MediaDocument, Name: "x.pdf", MIME: "application/pdf"}}
	if mi, _ := r.Read(context.Background(), in, fetch); !strings.Contains(mi.Reply, "I could not read x.pdf: it is not a readable PDF") {
		t.Fatalf("a malformed PDF: %+v; want the cannot-read reply with the reason", mi)
	}
	// A type the platform does not know is read by its name.
	in.Files = []core.InboundFile{{ID: "code", Kind: core.MediaDocument, Name: "main.go", MIME: "application/octet-stream"}}
	if mi, _ := r.Read(context.Background(), in, fetch); !strings.Contains(mi.Text, "package main") {
		t.Fatalf("main.go: %+v; want its text", mi)
	}
}

func TestReaderRefusesBeforeFetching(t *testing.T) {
	r := newReader(t, Options{MaxBytes: 100})
	n := 0
	fetch := serve(map[string]string{"a": "x"}, &n)
	for _, f := range []core.InboundFile{
		{ID: "a", Kind: core.MediaImage, MIME: "image/png"},                                 // no model sees
		{ID: "a", Kind: core.MediaAudio, MIME: "audio/ogg"},                                 // no transcription
		{ID: "a", Kind: core.MediaDocument, Name: "big.txt", MIME: "text/plain", Size: 101}, // over the limit
		{ID: "a", Kind: core.MediaDocument, Name: "x.docx", MIME: "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
	} {
		mi, err := r.Read(context.Background(), core.Inbound{Files: []core.InboundFile{f}}, fetch)
		if err != nil || mi.Reply == "" {
			t.Errorf("%+v: %+v, %v; want a reply", f, mi, err)
		}
	}
	if n != 0 {
		t.Fatalf("%d fetches; every refusal comes before the download", n)
	}
}

func TestReaderTooLargeWhileDownloading(t *testing.T) {
	r := newReader(t, Options{MaxBytes: 10})
	n := 0
	mi, err := r.Read(context.Background(), core.Inbound{Files: []core.InboundFile{{ID: "a", Kind: core.MediaDocument, Name: "a.txt", MIME: "text/plain"}}},
		serve(map[string]string{"a": strings.Repeat("y", 50)}, &n))
	if err != nil || !strings.Contains(mi.Reply, "a.txt is too large: it is larger than the 10 bytes limit I accept") {
		t.Fatalf("Read = %+v, %v; want the too-large reply", mi, err)
	}
}

// TestReaderRetryKeepsTheSniffedType: a file whose type the platform does
// not name is typed from its first bytes; a retry, which reads it from
// the media store instead of downloading it again, sees the same type and
// so gives the same answer.
func TestReaderRetryKeepsTheSniffedType(t *testing.T) {
	r := newReader(t, Options{})
	n := 0
	fetch := serve(map[string]string{"notes": "remember the milk\n"}, &n)
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "discord", Chat: "1"},
		Files: []core.InboundFile{{ID: "notes", Kind: core.MediaDocument, Name: "NOTES"}}}
	for attempt := 1; attempt <= 2; attempt++ {
		mi, err := r.Read(context.Background(), in, fetch)
		if err != nil || mi.Reply != "" || !strings.Contains(mi.Text, "remember the milk") {
			t.Fatalf("attempt %d: Read = %+v, %v; want the file's text", attempt, mi, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d downloads; the retry reads the media store", n)
	}
}

// An image is what its bytes say: a file the platform gave no type is
// read as the image it is (or refused as one when no model sees), and a
// photo the platform calls JPEG reaches the model with its actual format.
func TestReaderImagesAreTypedByTheirBytes(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
	for _, tt := range []struct {
		name   string
		file   core.InboundFile
		vision bool
		reply  string
	}{
		{name: "no type, a model sees", file: core.InboundFile{ID: "p", Kind: core.MediaDocument, Name: "pic.png"}, vision: true},
		{name: "octet-stream, a model sees", file: core.InboundFile{ID: "p", Kind: core.MediaDocument, Name: "pic", MIME: "application/octet-stream"}, vision: true},
		{name: "called JPEG", file: core.InboundFile{ID: "p", Kind: core.MediaImage, Name: "photo.jpg", MIME: "image/jpeg"}, vision: true},
		{name: "no type, no model sees", file: core.InboundFile{ID: "p", Kind: core.MediaDocument, Name: "pic.png"}, reply: noVision},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newReader(t, Options{Models: models{vision: tt.vision}})
			n := 0
			mi, err := r.Read(context.Background(), core.Inbound{Conversation: core.ConversationKey{Channel: "discord", Chat: "1"}, Files: []core.InboundFile{tt.file}},
				serve(map[string]string{"p": png}, &n))
			if err != nil || mi.Reply != tt.reply {
				t.Fatalf("Read = %+v, %v; want reply %q", mi, err, tt.reply)
			}
			if tt.reply != "" {
				return
			}
			if len(mi.Attachments) != 1 || mi.Attachments[0].Kind != core.MediaImage || mi.Attachments[0].MIME != "image/png" || mi.Text != "" {
				t.Fatalf("attachments %+v, text %q; want one image/png image", mi.Attachments, mi.Text)
			}
		})
	}
}

// TestReaderPlatformLimitIsNamed: a file within media.max_bytes that the
// platform refuses to serve for its size (Telegram's 20 MB for bots) is
// refused naming the platform's limit, not as larger than a limit it is
// within.
func TestReaderPlatformLimitIsNamed(t *testing.T) {
	r := newReader(t, Options{MaxBytes: 50 << 20})
	fetch := func(context.Context, core.InboundFile, io.Writer, int64) error {
		return &core.PlatformLimit{Platform: "Telegram", Max: 20 << 20}
	}
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "summarize",
		Files: []core.InboundFile{{ID: "big", Kind: core.MediaDocument, Name: "report.pdf", MIME: "application/pdf", Size: 30 << 20}}}
	mi, err := r.Read(context.Background(), in, fetch)
	if err != nil {
		t.Fatal(err)
	}
	want := "The file report.pdf (30 MB) is too large: Telegram lets bots download files of at most 20 MB"
	if !strings.Contains(mi.Reply, want) {
		t.Fatalf("reply %q; want %q", mi.Reply, want)
	}
}

// TestReaderDownloadFailureIsNamed: a file the platform fails to serve is
// a core.DownloadError of the cause's kind (so it is retried as that is),
// and the user hears that the file could not be downloaded, not that the
// AI provider failed. A download past media.download_timeout is a
// timeout of the download.
func TestReaderDownloadFailureIsNamed(t *testing.T) {
	in := core.Inbound{Conversation: core.ConversationKey{Channel: "telegram", Chat: "1"}, Text: "read",
		Files: []core.InboundFile{{ID: "a", Kind: core.MediaDocument, Name: "dir/notes.txt", MIME: "text/plain"}}}
	tests := []struct {
		name     string
		fetch    core.FetchFunc
		wantKind core.Kind
		wantUser string
	}{
		{name: "file host failing",
			fetch: func(context.Context, core.InboundFile, io.Writer, int64) error {
				return &core.Error{Kind: core.KindUnavailable, Msg: "file download: HTTP 502"}
			},
			wantKind: core.KindUnavailable, wantUser: "I could not download notes.txt from Telegram. Please try again later."},
		{name: "download too slow",
			fetch: func(ctx context.Context, _ core.InboundFile, w io.Writer, _ int64) error {
				w.Write([]byte("partial"))
				<-ctx.Done()
				return ctx.Err()
			},
			wantKind: core.KindTimeout, wantUser: "I could not download notes.txt from Telegram."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReader(t, Options{Timeout: time.Millisecond})
			_, err := r.Read(context.Background(), in, tt.fetch)
			var de *core.DownloadError
			if !errors.As(err, &de) || core.ErrorKind(err) != tt.wantKind {
				t.Fatalf("Read = %v (kind %s); want a DownloadError of kind %s", err, core.ErrorKind(err), tt.wantKind)
			}
			if msg := core.UserMessage(err); !strings.Contains(msg, tt.wantUser) || strings.Contains(msg, "AI provider") {
				t.Errorf("the user hears %q; want %q", msg, tt.wantUser)
			}
		})
	}
}
